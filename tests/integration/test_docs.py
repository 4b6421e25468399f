# SPDX-License-Identifier: MIT
"""The reference documentation covers what the code accepts and exports.

The configuration keys come from the key tables in agent/config.c (the one
place the agent learns what a key is); each must be described in
zkelect.yaml(5) and in doc/design.md's configuration table, and every key
of that table must be one the agent accepts. The metrics come from a real
agent's /metrics; each must be in README's metrics table.
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


def design_table_keys():
    design = read("doc/design.md")
    start = design.index("| key | default | meaning and checks |")
    table = design[start:design.index("\n\n", start)]
    keys = []
    for row in table.splitlines()[2:]:
        first = row.split("|")[1]
        names = re.findall(r"`([a-z_.]+)`", first)
        base = None
        for n in names:
            if n.startswith("."):       # `zookeeper.auth.scheme`, `.credentials`
                keys.append(tuple(base[:-1]) + (n[1:],))
            else:
                base = n.split(".")
                keys.append(tuple(base))
    return keys


def test_every_config_key_is_in_the_design_table():
    documented = set(design_table_keys())
    missing = [".".join(k) for k in config_keys() if k not in documented]
    assert missing == [], "keys missing from doc/design.md's configuration table: %s" % missing


def test_the_design_table_names_no_key_the_agent_refuses():
    accepted = set(config_keys())
    unknown = [".".join(k) for k in design_table_keys() if k not in accepted]
    assert unknown == [], "doc/design.md documents keys the agent does not accept: %s" % unknown


def test_every_metric_is_in_the_readme(tmp_path):
    # No ZooKeeper needed: the agent answers /metrics while it keeps trying.
    agent = Agent(str(tmp_path), "127.0.0.1:1", "/zkelect/docs", "docs")
    agent.start()
    try:
        body = agent.get("/metrics", timeout=5).body
    finally:
        agent.stop()
    names = sorted(set(re.findall(r"^# TYPE (\w+) ", body, re.M)))
    assert len(names) >= 20, body
    readme = read("README.md")
    table = readme[readme.index("### Metrics"):]
    table = table[:table.index("\n#")]
    documented = set(re.findall(r"zkelect_\w+", table))
    for n in list(documented):
        # `zkelect_renewal_seconds_{sum,count}` documents a summary's parts.
        if n.endswith("_"):
            documented.add(n[:-1])
    missing = [n for n in names if n not in documented]
    assert missing == [], "metrics the agent exports but README's table omits: %s" % missing
