/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for probe.c's pure parts: srvr's answer, the wire format of
 * the session probe (checked against bytes a ZooKeeper 3.8 server sent),
 * /zookeeper/config as ZooKeeper 3.8 writes it, and the decision of what
 * the server behind an address is (doc/design.md, "The lease").
 */
#include <arpa/inet.h>
#include <netinet/in.h>

#include <string.h>

#include <check.h>

#include "probe.h"

START_TEST(test_srvr_mode)
{
	const char *mode;

	ck_assert_int_eq(probe_srvr_mode("Zookeeper version: 3.8.0\n"
	    "Mode: follower\nNode count: 5\n", &mode), SERVER_VOTING);
	ck_assert_str_eq(mode, "follower");
	ck_assert_int_eq(probe_srvr_mode("Mode: standalone\n", &mode),
	    SERVER_VOTING);
	ck_assert_int_eq(probe_srvr_mode("Mode: leader\n", &mode),
	    SERVER_VOTING);
	ck_assert_int_eq(probe_srvr_mode("Mode: observer\n", &mode),
	    SERVER_OBSERVER);
	ck_assert_int_eq(probe_srvr_mode("srvr is not executed because it is "
	    "not in the whitelist.\n", &mode), SERVER_UNKNOWN);
	ck_assert_ptr_null(mode);
	ck_assert_int_eq(probe_srvr_mode("Mode: read-only\n", &mode),
	    SERVER_UNKNOWN);
}
END_TEST

/* The ConnectRequest of a 1 ms session, byte for byte; the answer a 3.8
 * server sent to it (minSessionTimeout 400 ms). */
START_TEST(test_connect_wire)
{
	static const uint8_t answer[] = {
		0, 0, 0, 0,  0, 0, 1, 0x90,		/* version, 400 ms */
		0x01, 0, 0, 0x1a, 0x7c, 0x2b, 0, 0,	/* session id */
		0, 0, 0, 16, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
		15, 16, 0,				/* passwd, readOnly */
	};
	uint8_t buf[64];
	size_t n = probe_connect_request(buf, 1);

	ck_assert_uint_eq(n, 49);
	ck_assert_int_eq(buf[3], 45);		/* the frame's length */
	ck_assert_int_eq(buf[4 + 4 + 8 + 3], 1);	/* the timeout */
	ck_assert_int_eq(buf[4 + 4 + 8 + 4 + 8 + 3], 16);	/* passwd */
	ck_assert_int_eq(probe_connect_timeout(answer, sizeof(answer)), 400);
	ck_assert_int_eq(probe_connect_timeout(answer, 10), -1);
}
END_TEST

START_TEST(test_reply_wire)
{
	static const uint8_t reply[] = {
		0, 0, 0, 1,  0, 0, 0, 0, 0, 0, 0, 1,  0, 0, 0, 0,
		0, 0, 0, 3, 'a', 'b', 'c',
	};
	static const uint8_t nonode[] = {
		0, 0, 0, 1,  0, 0, 0, 0, 0, 0, 0, 1,  0xff, 0xff, 0xff, 0x9b,
	};
	const uint8_t *data;
	int32_t xid, err, len;
	uint8_t buf[64];

	ck_assert_int_eq(probe_reply(reply, sizeof(reply), &xid, &err, &data,
	    &len), 0);
	ck_assert_int_eq(xid, 1);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(len, 3);
	ck_assert_int_eq(memcmp(data, "abc", 3), 0);
	/* cut short: the data says 3 bytes, 2 are there */
	ck_assert_int_eq(probe_reply(reply, sizeof(reply) - 1, &xid, &err,
	    &data, &len), -1);
	ck_assert_int_eq(probe_reply(nonode, sizeof(nonode), &xid, &err, &data,
	    &len), 0);
	ck_assert_int_eq(err, -101);
	ck_assert_int_eq(len, -1);
	/* A success with no data's length is no answer (it was taken for
	 * an empty config: no observers). */
	ck_assert_int_eq(probe_reply(reply, 16, &xid, &err, &data, &len), -1);
	ck_assert_uint_eq(probe_get_request(buf, sizeof(buf), 1,
	    "/zookeeper/config"), 4 + 8 + 4 + 17 + 1);
	ck_assert_uint_eq(probe_get_request(buf, 10, 1, "/zookeeper/config"),
	    0);
	ck_assert_uint_eq(probe_close_request(buf, 2), 12);
	ck_assert_int_eq((int8_t)buf[11], -11);
}
END_TEST

/* /zookeeper/config as ZooKeeper 3.8 writes it (tests/integration's
 * ensembles, with and without client addresses). */
START_TEST(test_config_parse)
{
	static const char plain[] =
	    "server.1=127.0.0.1:34433:45027:participant\n"
	    "server.2=127.0.0.2:58203:59333:participant\n"
	    "server.3=127.0.0.3:52937:59003:participant\n"
	    "server.4=127.0.0.4:33445:48095:observer\nversion=0";
	static const char client[] =
	    "server.1=127.0.0.1:32883:54337:participant;127.0.0.1:33705\n"
	    "server.2=[::1]:48359:43525:participant;0.0.0.0:39829\n"
	    "server.3=zk3.example.com:44687:47799;2181\n"
	    "version=100000000";
	struct probe_ensemble ens;

	ck_assert_int_eq(probe_config_parse(plain, strlen(plain), &ens), 0);
	ck_assert_int_eq(ens.n, 4);
	ck_assert_int_eq(ens.observers, 1);
	ck_assert_str_eq(ens.server[1].host, "127.0.0.2");
	ck_assert(ens.server[3].observer);
	ck_assert_int_eq(ens.server[0].client_port, 0);
	ck_assert_int_eq(probe_config_parse(client, strlen(client), &ens), 0);
	ck_assert_int_eq(ens.n, 3);
	ck_assert_int_eq(ens.observers, 0);
	ck_assert_str_eq(ens.server[0].client_host, "127.0.0.1");
	ck_assert_int_eq(ens.server[0].client_port, 33705);
	ck_assert_str_eq(ens.server[1].host, "::1");
	ck_assert_str_eq(ens.server[1].client_host, "0.0.0.0");
	ck_assert_str_eq(ens.server[2].host, "zk3.example.com");
	ck_assert_str_eq(ens.server[2].client_host, "");
	ck_assert_int_eq(ens.server[2].client_port, 2181);
	/* standalone: empty */
	ck_assert_int_eq(probe_config_parse("", 0, &ens), 0);
	ck_assert_int_eq(ens.n, 0);
	ck_assert_int_eq(probe_config_parse("server.1=nocolon\n", 17, &ens),
	    -1);
}
END_TEST

static struct sockaddr_storage
addr4(const char *ip, int port)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *a = (struct sockaddr_in *)&ss;

	memset(&ss, 0, sizeof(ss));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, ip, &a->sin_addr);
	return ss;
}

/*
 * What the server behind an address is. The case of issue 29: a
 * round-robin proxy in front of an observer and a follower, where srvr
 * reaches another server than the session's and says "voting".
 */
/*
 * Names longer than the host we keep (a Kubernetes service's) are still
 * names: the config is read, and its observers counted. (A parse that
 * failed on one would now mean no lease, ever.)
 */
START_TEST(test_config_long_names)
{
	static const char k8s[] =
	    "server.1=zookeeper-0.zookeeper-headless.production-data-platform"
	    ".svc.cluster.local:2888:3888:participant;0.0.0.0:2181\n"
	    "server.2=[zookeeper-1.zookeeper-headless.production-data-platform"
	    ".svc.cluster.local]:2888:3888:participant\n"
	    "server.3=zookeeper-2.zookeeper-headless.production-data-platform"
	    ".svc.cluster.local:2888:3888:observer;zookeeper-2.zookeeper-head"
	    "less.production-data-platform.svc.cluster.local:2181\nversion=0";
	struct probe_ensemble ens;
	struct sockaddr_storage proxy = addr4("127.0.0.100", 2181);
	char why[256];

	ck_assert_int_eq(probe_config_parse(k8s, strlen(k8s), &ens), 0);
	ck_assert_int_eq(ens.n, 3);
	ck_assert_int_eq(ens.observers, 1);
	ck_assert_int_eq(ens.server[2].client_port, 2181);
	/* Names: no proxy can be told, srvr decides (case 5). */
	ck_assert_int_eq(probe_decide(&ens, false, &proxy, SERVER_VOTING, why,
	    sizeof(why)), SERVER_VOTING);
}
END_TEST

START_TEST(test_decide)
{
	static const char none[] =
	    "server.1=127.0.0.1:1:2:participant\n"
	    "server.2=127.0.0.2:1:2:participant\nversion=0";
	static const char obs[] =
	    "server.1=127.0.0.1:1:2:participant\n"
	    "server.2=127.0.0.2:1:2:participant\n"
	    "server.3=127.0.0.3:1:2:participant\n"
	    "server.4=127.0.0.4:1:2:observer\nversion=0";
	static const char obs_client[] =
	    "server.1=127.0.0.1:1:2:participant;127.0.0.1:2181\n"
	    "server.4=127.0.0.4:1:2:observer;2182\nversion=0";
	static const char obs_names[] =
	    "server.1=zk1:1:2:participant\n"
	    "server.4=zk4:1:2:observer\nversion=0";
	struct probe_ensemble ens;
	struct sockaddr_storage proxy = addr4("127.0.0.100", 9000);
	struct sockaddr_storage zk2 = addr4("127.0.0.2", 2181);
	char why[256];

	/* No observer in the ensemble: voting, whatever srvr says. */
	probe_config_parse(none, strlen(none), &ens);
	ck_assert_int_eq(probe_decide(&ens, false, &proxy, SERVER_UNKNOWN, why,
	    sizeof(why)), SERVER_VOTING);
	/* srvr says observer: believed. */
	ck_assert_int_eq(probe_decide(&ens, false, &zk2, SERVER_OBSERVER, why,
	    sizeof(why)), SERVER_OBSERVER);
	/* Observers, and an address that is no server's: unidentified, even
	 * though srvr (through the proxy) said voting. */
	probe_config_parse(obs, strlen(obs), &ens);
	ck_assert_int_eq(probe_decide(&ens, false, &proxy, SERVER_VOTING, why,
	    sizeof(why)), SERVER_UNIDENTIFIED);
	ck_assert_ptr_nonnull(strstr(why, "127.0.0.100 is none of the 4"));
	/* A server's own host: srvr decides. */
	ck_assert_int_eq(probe_decide(&ens, false, &zk2, SERVER_VOTING, why,
	    sizeof(why)), SERVER_VOTING);
	ck_assert_int_eq(probe_decide(&ens, false, &zk2, SERVER_UNKNOWN, why,
	    sizeof(why)), SERVER_UNIDENTIFIED);
	/* Client addresses in the server lines: the match decides. */
	probe_config_parse(obs_client, strlen(obs_client), &ens);
	zk2 = addr4("127.0.0.4", 2182);
	ck_assert_int_eq(probe_decide(&ens, false, &zk2, SERVER_VOTING, why,
	    sizeof(why)), SERVER_OBSERVER);
	zk2 = addr4("127.0.0.1", 2181);
	ck_assert_int_eq(probe_decide(&ens, false, &zk2, SERVER_UNKNOWN, why,
	    sizeof(why)), SERVER_VOTING);
	/* Servers named by host name: no proxy can be told; srvr decides. */
	probe_config_parse(obs_names, strlen(obs_names), &ens);
	ck_assert_int_eq(probe_decide(&ens, false, &proxy, SERVER_VOTING, why,
	    sizeof(why)), SERVER_VOTING);
	/* The server has no config for us (before 3.5, an ACL): srvr
	 * decides, as before. */
	ck_assert_int_eq(probe_decide(NULL, true, &proxy, SERVER_VOTING, why,
	    sizeof(why)), SERVER_VOTING);
	ck_assert_int_eq(probe_decide(NULL, true, &proxy, SERVER_UNKNOWN, why,
	    sizeof(why)), SERVER_UNKNOWN);
	/* The read got no answer (the probe's session failed): nothing is
	 * known of observers, and srvr may speak for another server behind
	 * a proxy. */
	ck_assert_int_eq(probe_decide(NULL, false, &proxy, SERVER_VOTING, why,
	    sizeof(why)), SERVER_UNIDENTIFIED);
	ck_assert_ptr_nonnull(strstr(why, "/zookeeper/config was not read"));
	ck_assert_int_eq(probe_decide(NULL, false, &zk2, SERVER_OBSERVER, why,
	    sizeof(why)), SERVER_OBSERVER);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("probe");
	TCase *tc = tcase_create("probe");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_srvr_mode);
	tcase_add_test(tc, test_connect_wire);
	tcase_add_test(tc, test_reply_wire);
	tcase_add_test(tc, test_config_parse);
	tcase_add_test(tc, test_config_long_names);
	tcase_add_test(tc, test_decide);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
