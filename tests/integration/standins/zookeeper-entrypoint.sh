#!/bin/sh
# Writes /conf/zoo.cfg from the official image's variables, then runs
# ZooKeeper in the foreground (logging to the console).
set -eu
cat > /conf/zoo.cfg <<CFG
dataDir=/data
dataLogDir=/datalog
tickTime=${ZOO_TICK_TIME:-2000}
initLimit=${ZOO_INIT_LIMIT:-5}
syncLimit=${ZOO_SYNC_LIMIT:-2}
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
maxClientCnxns=60
standaloneEnabled=${ZOO_STANDALONE_ENABLED:-true}
admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-true}
4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}
CFG
if [ -n "${ZOO_SERVERS:-}" ]; then
	for s in $ZOO_SERVERS; do echo "$s"; done >> /conf/zoo.cfg
else
	echo "clientPort=2181" >> /conf/zoo.cfg
fi
if [ -n "${ZOO_CFG_EXTRA:-}" ]; then
	for s in $ZOO_CFG_EXTRA; do echo "$s"; done >> /conf/zoo.cfg
fi
echo "${ZOO_MY_ID:-1}" > /data/myid
cat > /conf/log4j.properties <<CFG
log4j.rootLogger=INFO, C
log4j.appender.C=org.apache.log4j.ConsoleAppender
log4j.appender.C.layout=org.apache.log4j.PatternLayout
log4j.appender.C.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] %m%n
CFG
j=/usr/share/java
exec java -Xmx256m -XX:+UseSerialGC -Dlog4j.configuration=file:/conf/log4j.properties \
	-cp "/conf:$j/zookeeper.jar:$j/slf4j-log4j12.jar:$j/log4j-1.2.jar" \
	org.apache.zookeeper.server.quorum.QuorumPeerMain /conf/zoo.cfg
