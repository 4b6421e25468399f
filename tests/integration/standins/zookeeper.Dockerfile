# A stand-in for the official zookeeper:3.8 image, built from Debian's
# zookeeper package (3.8.0), for the compose test on machines that cannot
# pull from a registry. It reads the same environment as the official image
# (ZOO_MY_ID, ZOO_SERVERS, ZOO_TICK_TIME, ZOO_INIT_LIMIT, ZOO_SYNC_LIMIT,
# ZOO_STANDALONE_ENABLED, ZOO_ADMINSERVER_ENABLED, ZOO_4LW_COMMANDS_WHITELIST,
# ZOO_CFG_EXTRA) and keeps its data in /data and /datalog.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends zookeeper default-jre-headless \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
RUN install -d -o zookeeper -g zookeeper /conf /data /datalog
COPY zookeeper-entrypoint.sh /docker-entrypoint.sh
USER zookeeper
EXPOSE 2181 2888 3888
ENTRYPOINT ["/docker-entrypoint.sh"]
