# SPDX-License-Identifier: MIT
"""The reference documentation covers what the code accepts and exports.

The man pages are the one reference for the configuration and the API.
The configuration keys come from the key tables in agent/config.c (the one
place the agent learns what a key is); each must be described in
zkelect.yaml(5). The endpoints come from api.c's router and the fields
from real agents' documents (with and without partitions); each must be
in zkelectd(8)'s LOCAL API section. The metrics come from a real agent's
/metrics; each must be in README's metrics table.
"""

import os
import re

from zkharness import Agent  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def config_keys():
    """Every key path the agent accepts, from config.c's tables:
    [("zookeeper", "servers"), ("zookeeper", "auth", "scheme"), ...]."""
    src = read("agent/config.c")
    tables = {}
    for m in re.finditer(r"static const struct key (\w+)\[\] = \{(.*?)\n\};", src, re.S):
        rows = []
        for r in re.finditer(r"\{\s*\"(\w+)\",\s*(K_\w+),(.*?)\}", m.group(2), re.S):
            fields = [x.strip() for x in r.group(3).split(",")]
            sub = next((x for x in fields if x.endswith("_keys")), None)
            rows.append((r.group(1), r.group(2), sub))
        tables[m.group(1)] = rows
    assert "root_keys" in tables, "config.c has no root_keys table: update this test"
    out = []

    def walk(table, prefix):
        for name, kind, sub in tables[table]:
            if kind == "K_SECTION":
                walk(sub, prefix + (name,))
            else:
                out.append(prefix + (name,))
    walk("root_keys", ())
    return out


def test_config_keys_are_read_from_the_tables():
    keys = config_keys()
    # What this test parses must be the real thing, not an empty list.
    assert ("zookeeper", "servers") in keys
    assert ("zookeeper", "auth", "credentials") in keys
    assert ("notify", "run") in keys
    assert len(keys) >= 20


def test_every_config_key_is_in_the_man_page():
    man = read("doc/zkelect.yaml.5")
    sections = {}
    for m in re.finditer(r"^\.SH SECTION (\w+)[^\n]*\n(.*?)(?=^\.SH |\Z)", man, re.S | re.M):
        sections[m.group(1)] = m.group(2)
    missing = []
    for key in config_keys():
        body = sections.get(key[0])
        # A key is described by a tagged paragraph whose tag starts with it.
        if body is None or not re.search(r"^\.(?:TP\n)?\.BR? %s\b" % re.escape(key[-1]),
                                         body, re.M):
            missing.append(".".join(key))
    assert missing == [], "keys the agent accepts but zkelect.yaml(5) does not describe: %s" \
        % missing


def man_local_api():
    """zkelectd(8)'s LOCAL API section, as plain text (roff escapes and
    font requests dropped)."""
    man = read("doc/zkelectd.8")
    sec = man[man.index(".SH LOCAL API"):]
    sec = sec[:sec.index("\n.SH ", 1)]
    sec = re.sub(r"^\.(?:B|BI|BR|RB|IR|I)\s+", "", sec, flags=re.M)
    return sec.replace("\\-", "-").replace('"', " ")


def test_every_endpoint_is_in_the_man_page():
    src = read("agent/api.c")
    routes = re.findall(r"strn?cmp\(target, \"(/[^\"]*)\"", src)
    assert "/v1/status" in routes and "/metrics" in routes, routes
    text = man_local_api()
    missing = [r for r in routes if r not in text]
    assert missing == [], "endpoints the agent routes but zkelectd(8) does not name: %s" \
        % missing


def documented_field(text, name):
    """A field is described where its name stands alone: a tagged
    paragraph (.TP/.B name) or a name in a list of them."""
    return re.search(r"(?<![\w.])%s(?![\w])" % re.escape(name), text) is not None


def test_every_status_field_is_in_the_man_page(tmp_path):
    # No ZooKeeper needed: the agent answers while it keeps trying. With
    # partitions, both documents; without, the plain status document.
    plain = Agent(str(tmp_path), "127.0.0.1:1", "/zkelect/docs", "docs")
    parted = Agent(str(tmp_path), "127.0.0.1:1", "/zkelect/docs2", "docs2",
                   extra_yaml="partitions:\n  count: 2\n")
    docs = []
    for agent in (plain, parted):
        agent.start()
        try:
            docs.append(agent.get("/v1/status", timeout=5).json())
            if agent is parted:
                docs.append(agent.get("/v1/partitions", timeout=5).json())
        finally:
            agent.stop()
    fields = set()

    def walk(d):
        for k, v in d.items():
            fields.add(k)
            if isinstance(v, dict):
                walk(v)
            elif isinstance(v, list):
                for x in v:
                    if isinstance(x, dict):
                        walk(x)
    for d in docs:
        walk(d)
    assert {"is_leader", "epoch", "session", "state", "partitions", "members"} <= fields, fields
    text = man_local_api()
    missing = sorted(f for f in fields if not documented_field(text, f))
    assert missing == [], "fields the agent answers with but zkelectd(8) does not " \
        "describe: %s" % missing


def exported_metrics(tmp_path):
    """Every metric family a real agent exports, with partitions and
    without (no ZooKeeper needed: the agent answers /metrics while it keeps
    trying)."""
    names = set()
    for agent in (Agent(str(tmp_path), "127.0.0.1:1", "/zkelect/docs", "docs"),
                  Agent(str(tmp_path), "127.0.0.1:1", "/zkelect/docs2", "docs2",
                        extra_yaml="partitions:\n  count: 2\n")):
        agent.start()
        try:
            body = agent.get("/metrics", timeout=5).body
        finally:
            agent.stop()
        names |= set(re.findall(r"^# TYPE (\w+) ", body, re.M))
    assert len(names) >= 20 and "zkelect_partitions_owned" in names, names
    return sorted(names)


def test_every_metric_is_documented(tmp_path):
    """In README's metrics table and in zkelectd(8)'s Metrics."""
    names = exported_metrics(tmp_path)
    readme = read("README.md")
    table = readme[readme.index("### Metrics"):]
    table = table[:table.index("\n##")]
    documented = set(re.findall(r"zkelect_\w+", table))
    for n in list(documented):
        # `zkelect_renewal_seconds_{sum,count}` documents a summary's parts.
        if n.endswith("_"):
            documented.add(n[:-1])
    missing = [n for n in names if n not in documented]
    assert missing == [], "metrics the agent exports but README's table omits: %s" % missing
    man = man_text("doc/zkelectd.8")
    man = man[man.index(".SS Metrics"):]
    man = man[:man.index("\n.S", 1)]
    missing = [n for n in names if not re.search(r"^\.BR? .*\b%s\b" % n, man, re.M)]
    assert missing == [], "metrics the agent exports but zkelectd(8)'s Metrics omits: " \
        "%s" % missing


def ctl_verbs():
    """The verbs zkelectctl's main() dispatches on."""
    src = read("ctl/zkelectctl.c")
    main = src[src.index("\nmain(int argc"):]
    return sorted(set(re.findall(r'strcmp\(cmd, "([a-z-]+)"\) == 0', main)))


def long_options(rel, table):
    """The long options of a getopt table (`{ "name", ...`) in file rel,
    in the array that follows `table`."""
    src = read(rel)
    block = src[src.index(table):]
    block = block[:block.index("};")]
    return re.findall(r'\{\s*"([a-z-]+)",', block)


def man_text(rel):
    return read(rel).replace("\\-", "-")


def test_every_zkelectctl_verb_is_documented():
    verbs = ctl_verbs()
    assert {"status", "run", "members", "lock", "elect", "hold"} <= set(verbs), verbs
    man, design = man_text("doc/zkelectctl.1"), read("doc/design.md")
    missing = [v for v in verbs if not re.search(r"^\.B %s\b" % re.escape(v), man, re.M)
               or "| `%s" % v not in design]
    assert missing == [], "verbs zkelectctl runs but zkelectctl(1) (a .B VERB entry) or " \
        "design.md's verb table omits: %s" % missing


def test_every_zkelectd_flag_is_documented():
    flags = [f[2:] for f in re.findall(r'\{ "(--[a-z-]+)", "[a-z_.]+" \}',
                                       read("agent/main.c"))]
    flags += long_options("agent/main.c", "longopts[5 + AGENT_NFLAGS] = {")
    assert {"zookeeper", "path", "run-exit", "run-output", "config", "check-config"} \
        <= set(flags), flags
    man, design = man_text("doc/zkelectd.8"), read("doc/design.md")
    missing = [f for f in flags if "--" + f not in man or
               (f not in ("config", "check-config", "version", "help") and
                "`--%s`" % f not in design)]
    assert missing == [], "zkelectd flags not in zkelectd(8) or design.md: %s" % missing


def test_every_lock_and_members_option_is_documented():
    man = man_text("doc/zkelectctl.1")
    opts = long_options("ctl/lock.c", "static const struct option opts[] = {")
    opts += long_options("ctl/members.c", "static const struct option opts[] = {")
    assert {"zookeeper", "session-timeout", "config"} <= set(opts), opts
    missing = [o for o in opts if "--" + o not in man]
    assert missing == [], "options of lock/elect/members not in zkelectctl(1): %s" % missing


# --------------------------------------------------------------------------
# What an operator must know to run the units (issue 32, item 6).

def readme_section(title):
    """README's section TITLE (a ### heading), up to the next heading."""
    text = read("README.md")
    start = text.index("\n### %s\n" % title)
    end = re.search(r"\n##+ ", text[start + 1:])
    return text[start:start + 1 + end.start()] if end else text[start:]


def man_plain(rel):
    """A man page as plain text: roff's requests and escapes dropped."""
    text = read(rel)
    text = re.sub(r"^\.(?:B|BI|BR|RB|IR|I|TP|PP|IP|RS|RE|nf|fi|EX|EE)\b ?", "", text, flags=re.M)
    text = re.sub(r"\\f[BIRP]", "", text)
    return text.replace("\\-", "-").replace("\\(em", "-").replace('"', "")


# Where an operator reads about the units: README (systemd), the package's
# README.Debian, and zkelectd(8).
OPERATOR_DOCS = {
    "README.md": lambda: readme_section("systemd"),
    "debian/README.Debian": lambda: read("debian/README.Debian"),
    "doc/zkelectd.8": lambda: man_plain("doc/zkelectd.8"),
}


def test_docs_say_the_app_must_be_in_group_zkelect():
    """Under the units the socket is 0660 zkelect:zkelect: an app of
    another user gets `Permission denied`. Each document says so, and how
    to let the app in (tests/integration/test_systemd.py runs it)."""
    missing = []
    for rel, text in OPERATOR_DOCS.items():
        t = " ".join(text().split())
        for phrase in ("0660", "group zkelect", "usermod -aG zkelect",
                       "SupplementaryGroups=zkelect", "Permission denied"):
            if phrase not in t:
                missing.append("%s: %r" % (rel, phrase))
    assert missing == [], missing


def test_docs_say_the_unit_reaches_only_loopback():
    """IPAddressAllow=localhost: a ZooKeeper elsewhere is blocked until a
    drop-in allows it; README (not only README.Debian) and zkelectd(8) say
    so, with the drop-in."""
    missing = []
    for rel, text in OPERATOR_DOCS.items():
        t = " ".join(text().split())
        for phrase in ("IPAddressAllow=localhost", "systemctl edit zkelectd@",
                       "IPAddressAllow=10.0.0.0/24"):
            if phrase not in t:
                missing.append("%s: %r" % (rel, phrase))
    assert missing == [], missing
