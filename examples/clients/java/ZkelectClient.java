// SPDX-License-Identifier: MIT
//
// A complete zkelect app in Java 17 (JDK only): it talks HTTP to its agent
// over a Unix-domain SocketChannel, asks whether this instance leads
// (GET /v1/status), then long-polls for changes (GET /v1/status?wait=30s&index=N).
// Whenever an answer says is_leader, it does its "work": one write that
// carries that answer's epoch, here a line "epoch=E" appended to a file. A real
// app sends the epoch with its write, and the resource refuses a write whose
// epoch is lower than one it has already seen.
//
//   java ZkelectClient.java --socket /run/zkelect/zkelect.sock --out /tmp/writes.txt
//
// An agent that cannot be reached, or does not answer in time, counts as
// "not leader": the client writes nothing until an answer says otherwise.

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public class ZkelectClient {
    /** The fields of /v1/status this app uses. */
    record Status(String role, boolean isLeader, Long epoch, long leaseRemainingMs, long index) {
        static Status parse(String json) throws IOException {
            return new Status(field(json, "role", "\"([a-z]+)\""),
                    "true".equals(field(json, "is_leader", "(true|false)")),
                    number(field(json, "epoch", "(null|\\d+)")),
                    Long.parseLong(field(json, "lease_remaining_ms", "(-?\\d+)")),
                    Long.parseLong(field(json, "index", "(\\d+)")));
        }

        // The document is flat where these keys are (top level, each once, before
        // the nested "leader" object), so a pattern per key is enough here; a
        // larger app would use its JSON library.
        private static String field(String json, String key, String value) throws IOException {
            Matcher m = Pattern.compile("\"" + key + "\"\\s*:\\s*" + value).matcher(json);
            if (!m.find())
                throw new IOException("no \"" + key + "\" in " + json);
            return m.group(1);
        }

        private static Long number(String s) {
            return s.equals("null") ? null : Long.parseUnsignedLong(s);
        }
    }

    /** One request on a fresh connection; the whole answer within timeoutMs. */
    static Status get(Path socket, String target, long timeoutMs) throws IOException {
        long deadline = System.nanoTime() + timeoutMs * 1_000_000;
        try (SocketChannel ch = SocketChannel.open(UnixDomainSocketAddress.of(socket));
             Selector sel = Selector.open()) {
            ch.write(ByteBuffer.wrap(("GET " + target + " HTTP/1.1\r\nHost: localhost\r\n"
                    + "Connection: close\r\n\r\n").getBytes(StandardCharsets.US_ASCII)));
            ch.configureBlocking(false);
            ch.register(sel, SelectionKey.OP_READ);
            ByteArrayOutputStream answer = new ByteArrayOutputStream();
            ByteBuffer buf = ByteBuffer.allocate(4096);
            for (;;) {
                long left = (deadline - System.nanoTime()) / 1_000_000;
                if (left <= 0)
                    throw new IOException("no answer within " + timeoutMs + " ms");
                sel.select(left);
                sel.selectedKeys().clear();
                int n;
                while ((n = ch.read(buf)) > 0) {
                    answer.write(buf.array(), 0, n);
                    buf.clear();
                }
                if (n < 0)
                    break; // the agent closed: the answer is complete
            }
            String text = answer.toString(StandardCharsets.UTF_8);
            if (text.isEmpty())
                throw new IOException("the agent closed the connection without an answer");
            int body = text.indexOf("\r\n\r\n");
            if (!text.startsWith("HTTP/1.1 200 ") || body < 0)
                throw new IOException("agent answered: " + text.lines().findFirst().orElse(""));
            return Status.parse(text.substring(body + 4));
        }
    }

    /**
     * The fenced write: it carries the epoch of the answer that said "you lead".
     * Here a line in a file; a database would do
     * UPDATE ... SET ..., epoch = E WHERE ... AND epoch <= E.
     */
    static void write(Path out, long epoch) throws IOException {
        Files.writeString(out, "epoch=" + Long.toUnsignedString(epoch) + "\n",
                StandardOpenOption.CREATE, StandardOpenOption.APPEND, StandardOpenOption.WRITE);
    }

    public static void main(String[] args) throws Exception {
        Path socket = Path.of("/run/zkelect/zkelect.sock");
        Path out = Path.of("writes.txt");
        long waitMs = 30_000;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--socket" -> socket = Path.of(args[i + 1]);
                case "--out" -> out = Path.of(args[i + 1]);
                case "--wait-ms" -> waitMs = Long.parseLong(args[i + 1]);
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> System.err.println("stopping")));

        long index = -1; // the first request is a plain GET
        for (;;) {
            Status s;
            try {
                String target = index < 0 ? "/v1/status"
                        : "/v1/status?wait=" + waitMs + "ms&index=" + index;
                // The client's own deadline: the long poll's wait and a little more.
                s = get(socket, target, waitMs + 5_000);
            } catch (IOException e) {
                // Unreachable or no answer in time: not leader. Retry soon.
                System.err.println("agent unreachable (" + e.getMessage() + "): not leader");
                index = -1;
                Thread.sleep(1000);
                continue;
            }
            if (s.index() != index) {
                System.err.printf("status: role=%s is_leader=%b epoch=%s index=%d%n", s.role(),
                        s.isLeader(), s.epoch() == null ? "null" : Long.toUnsignedString(s.epoch()),
                        s.index());
                if (s.isLeader() && s.epoch() != null && s.leaseRemainingMs() > 0) {
                    write(out, s.epoch());
                    System.err.println("write: epoch=" + Long.toUnsignedString(s.epoch()));
                }
            }
            index = s.index();
        }
    }
}
