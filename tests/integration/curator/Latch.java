// SPDX-License-Identifier: MIT
//
// A minimal Apache Curator LeaderLatch participant for the zkelect interop
// tests (tests/integration/test_curator.py). It joins the LeaderLatch at PATH
// on the ZooKeeper CONNECT string with ID as its participant id, and prints
// one line per event on stdout, each flushed at once:
//
//   NODE <id> <mono_ns> <our node path>   its contender node exists
//   LEADER <id> <mono_ns>                 isLeader() was called (hasLeadership true)
//   NOTLEADER <id> <mono_ns>              notLeader() was called, or it is about
//                                         to close while leading
//   CLOSING <id> <mono_ns>                about to latch.close() (node deleted next)
//   CLOSED <id> <mono_ns>                 latch and client closed; exit follows
//   STATE <id> <mono_ns> LEADER|NOTLEADER answer to a "state" line on stdin
//
// mono_ns is System.nanoTime(), which HotSpot on Linux reads from
// CLOCK_MONOTONIC: the same clock as Python's time.monotonic(), so a test can
// order these events against its own samples.
//
// It closes cleanly (NOTLEADER if leading, then latch.close(), which deletes
// its node) on stdin EOF, on a "close" line, or on SIGTERM (shutdown hook).
// Usage: java -cp ... Latch CONNECT PATH ID [SESSION_TIMEOUT_MS]

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.retry.ExponentialBackoffRetry;

public final class Latch {
    private static final Object OUT = new Object();
    private static CuratorFramework client;
    private static LeaderLatch latch;
    private static String id;
    private static boolean closed = false;

    static void emit(String what, String rest) {
        synchronized (OUT) {
            String line = what + " " + id + " " + System.nanoTime() + (rest == null ? "" : " " + rest);
            System.out.println(line);
            System.out.flush();
        }
    }

    static synchronized void shutdown() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            // An app stops acting as leader before it lets its node go, so
            // that its successor (woken by the deletion) cannot overlap it.
            if (latch.hasLeadership()) {
                emit("NOTLEADER", null);
            }
            emit("CLOSING", null);
            latch.close(LeaderLatch.CloseMode.SILENT);
        } catch (Exception e) {
            System.err.println("latch close failed: " + e);
        }
        try {
            client.close();
        } catch (Exception e) {
            System.err.println("client close failed: " + e);
        }
        emit("CLOSED", null);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3 || args.length > 4) {
            System.err.println("usage: Latch CONNECT PATH ID [SESSION_TIMEOUT_MS]");
            System.exit(1);
        }
        String connect = args[0];
        String path = args[1];
        id = args[2];
        int sessionMs = args.length > 3 ? Integer.parseInt(args[3]) : 4000;

        client = CuratorFrameworkFactory.builder()
                .connectString(connect)
                .sessionTimeoutMs(sessionMs)
                .connectionTimeoutMs(Math.max(sessionMs, 3000))
                .retryPolicy(new ExponentialBackoffRetry(100, 10, 1000))
                .build();
        client.start();

        latch = new LeaderLatch(client, path, id, LeaderLatch.CloseMode.SILENT);
        latch.addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
                emit("LEADER", null);
            }

            @Override
            public void notLeader() {
                emit("NOTLEADER", null);
            }
        });
        Runtime.getRuntime().addShutdownHook(new Thread(Latch::shutdown, "latch-shutdown"));
        latch.start();

        Thread nodeReporter = new Thread(() -> {
            try {
                while (!closed) {
                    String p = latch.getOurPath();
                    if (p != null) {
                        emit("NODE", p);
                        return;
                    }
                    Thread.sleep(5);
                }
            } catch (InterruptedException e) {
                // exiting
            }
        }, "node-reporter");
        nodeReporter.setDaemon(true);
        nodeReporter.start();

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("close")) {
                break;
            } else if (line.equals("state")) {
                emit("STATE", latch.hasLeadership() ? "LEADER" : "NOTLEADER");
            }
        }
        shutdown();
        System.exit(0);
    }
}
