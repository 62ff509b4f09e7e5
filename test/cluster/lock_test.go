package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockHolderEnv makes the test binary a lock holder: it takes the lock at that path, says "locked" and keeps it
// until its stdin closes. It is another process, as another real node's would be.
const lockHolderEnv = "WEBAPP_TEST_LOCK_HOLDER"

func TestMain(m *testing.M) {
	if path := os.Getenv(lockHolderEnv); path != "" {
		os.Exit(holdLock(path))
	}
	os.Exit(m.Run())
}

// lockChildEnv makes the holder start a sleep that inherits the lock, say "locked PID" and exit at once: a node's
// serving process killed while its components run.
const lockChildEnv = "WEBAPP_TEST_LOCK_CHILD"

func holdLock(path string) int {
	l, err := LockNode(path, 0, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = l.Release() }()
	if os.Getenv(lockChildEnv) != "" {
		sleep := exec.Command("sleep", "600")
		sleep.ExtraFiles = []*os.File{l.f}
		if err := sleep.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("locked", sleep.Process.Pid)
		return 0
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// holder is a lock-holding process.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startHolder starts a process holding the lock at path and waits (30 s at most) until it holds it.
func startHolder(t *testing.T, path string) *holder {
	t.Helper()
	h, _ := startHolderWith(t, path)
	return h
}

// startHolderWith starts a holder with more environment and returns what it said after "locked".
func startHolderWith(t *testing.T, path string, env ...string) (*holder, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), lockHolderEnv+"="+path), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(h.stop)
	said := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		said <- line
	}()
	select {
	case line := <-said:
		rest, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "locked")
		if !ok {
			t.Fatalf("the holder said %q", line)
		}
		return h, strings.TrimSpace(rest)
	case <-time.After(30 * time.Second):
		t.Fatal("the holder did not take the lock within 30 s")
	}
	return h, ""
}

// stop closes the holder's stdin and waits for it to exit.
func (h *holder) stop() {
	_ = h.stdin.Close()
	_ = h.cmd.Wait()
}

func TestASecondNodeIsRefusedWhileAnotherProcessHoldsTheLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "realnode.lock")
	h := startHolder(t, path)
	info, err := readProc(h.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	for name, take := range map[string]func() (*NodeLock, error){
		"LockNode":      func() (*NodeLock, error) { return LockNode(path, 0, nil) },
		"AdoptNodeLock": func() (*NodeLock, error) { return AdoptNodeLock(path) },
	} {
		start := time.Now()
		l, err := take()
		var locked *LockedError
		if !errors.As(err, &locked) {
			_ = l.Release()
			t.Fatalf("%s while another process holds the lock = %v, want a LockedError", name, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("%s took %v to refuse without a wait", name, took)
		}
		want := LockHolder{PID: h.cmd.Process.Pid, Command: info.command, Checkout: RepoRoot(),
			Started: startedAt(info.startTime), StartTime: info.startTime}
		if locked.Holder != want {
			t.Fatalf("%s: holder %+v, want %+v", name, locked.Holder, want)
		}
		msg := err.Error()
		for _, part := range []string{"another real node runs on this machine: " + path + " is held by pid " +
			strconv.Itoa(h.cmd.Process.Pid) + " (" + info.command + "), checkout " + RepoRoot() + ", started ",
			"stop that one (make cluster-down NODE=real in its checkout)"} {
			if !strings.Contains(msg, part) {
				t.Fatalf("%s: refusal %q lacks %q", name, msg, part)
			}
		}
	}
}

func TestALockHeldByWhatAGoneHolderStartedNamesThoseProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "realnode.lock")
	h, said := startHolderWith(t, path, lockChildEnv+"=1")
	sleepPID, err := strconv.Atoi(said)
	if err != nil {
		t.Fatalf("the holder said %q", said)
	}
	sleep, err := os.FindProcess(sleepPID) // a pidfd: the kill below reaches this sleep or nothing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleep.Kill() })
	h.stop() // the holder has exited; the sleep it started keeps the lock
	_, err = LockNode(path, 0, nil)
	var locked *LockedError
	if !errors.As(err, &locked) {
		t.Fatalf("LockNode = %v, want a LockedError", err)
	}
	want := fmt.Sprintf(" is held by processes that outlived their node's own (pid %d (", h.cmd.Process.Pid)
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf(" UTC): pid %d (sleep); ", sleepPID)) {
		t.Fatalf("refusal %q does not name the gone holder and the sleep %d", err, sleepPID)
	}
	if err := sleep.Kill(); err != nil {
		t.Fatal(err)
	}
	l, err := LockNode(path, 30*time.Second, io.Discard)
	if err != nil {
		t.Fatalf("the lock stays held after the last process holding it died: %v", err)
	}
	_ = l.Release()
}

func TestWaitingForTheLockEndsAtItsDeadlineWithTheHoldersName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "realnode.lock")
	h := startHolder(t, path)
	var progress bytes.Buffer
	start := time.Now()
	l, err := LockNode(path, 700*time.Millisecond, &progress)
	took := time.Since(start)
	var locked *LockedError
	if !errors.As(err, &locked) {
		_ = l.Release()
		t.Fatalf("LockNode = %v, want a LockedError", err)
	}
	if took < 700*time.Millisecond || took > 5*time.Second {
		t.Fatalf("gave up after %v, want 700ms", took)
	}
	if !strings.Contains(err.Error(), "another real node runs on this machine (waited 700ms): ") {
		t.Fatalf("refusal %q does not say how long it waited", err)
	}
	want := fmt.Sprintf("waiting up to 700ms for the real node of pid %d (", h.cmd.Process.Pid)
	if !strings.HasPrefix(progress.String(), want) || strings.Count(progress.String(), "\n") != 1 {
		t.Fatalf("progress %q, want one line starting %q", progress.String(), want)
	}
}

func TestTheLockIsTakenOnceItsHolderExits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "realnode.lock")
	h := startHolder(t, path)
	got := make(chan error, 1)
	go func() {
		l, err := LockNode(path, time.Minute, io.Discard)
		if err == nil {
			h, _ := os.ReadFile(path)
			if !strings.Contains(string(h), fmt.Sprintf(`"pid":%d,`, os.Getpid())) {
				err = fmt.Errorf("the lock names %s, not this process", h)
			}
			err = errors.Join(err, l.Release())
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("took the lock while the holder held it: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	h.stop()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the lock was not taken within 30 s of its holder's exit")
	}
}

func TestAnInheritedLockIsAdoptedAndOnlyThatOne(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "realnode.lock")
	parent, err := LockNode(path, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = parent.Release() }()
	// What a child sees: the parent's descriptor (the same open file) under the number in the environment.
	fd, err := syscall.Dup(int(parent.f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(lockFDEnv, strconv.Itoa(fd))
	child, err := AdoptNodeLock(path)
	if err != nil {
		t.Fatalf("adopting the inherited lock: %v", err)
	}
	if os.Getenv(lockFDEnv) != "" {
		t.Fatal("the descriptor's number stays in the environment of the children")
	}
	if flags, err := fcntlFlags(fd); err != nil || flags&syscall.FD_CLOEXEC == 0 {
		t.Fatalf("the adopted descriptor is inherited by the node's processes (flags %v, %v)", flags, err)
	}
	if _, err := LockNode(path, 0, nil); err == nil {
		t.Fatal("a new lock was taken while the adopted one is held")
	}
	// Released by the child, still held through the parent's descriptor.
	if err := child.Release(); err != nil {
		t.Fatal(err)
	}
	var locked *LockedError
	if _, err := LockNode(path, 0, nil); !errors.As(err, &locked) || locked.Holder.PID != os.Getpid() {
		t.Fatalf("after the child's release: %v, want a LockedError naming this process", err)
	}

	// A descriptor of another file is refused.
	other, err := os.Create(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	otherFD, err := syscall.Dup(int(other.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(lockFDEnv, strconv.Itoa(otherFD))
	if _, err := AdoptNodeLock(path); err == nil || !strings.Contains(err.Error(), "is not the lock file") {
		t.Fatalf("adopting another file's descriptor = %v", err)
	}
}

func fcntlFlags(fd int) (int, error) {
	r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
