package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// One real node per machine. Two would share the kubepods cgroups (and the fixed paths' bind mounts), and each
// one's teardown would kill the other's containers. Whoever runs one holds an exclusive flock on one file of the
// machine, /run/webapp-operator/realnode.lock ($WEBAPP_REALNODE_LOCK moves it), written with the holder's identity;
// the kernel drops the lock when the last process holding it exits, however it dies.

// DefaultNodeLockPath is the real node's lock; /run is the machine's and starts empty at every boot.
const DefaultNodeLockPath = "/run/webapp-operator/realnode.lock"

// lockFDEnv names the inherited descriptor of a lock taken by a parent (`localcluster up` for its serve process,
// the real-node tests for their run inside the namespace).
const lockFDEnv = "WEBAPP_REALNODE_LOCK_FD"

// NodeLockPath is $WEBAPP_REALNODE_LOCK, or DefaultNodeLockPath.
func NodeLockPath() string {
	if p := os.Getenv("WEBAPP_REALNODE_LOCK"); p != "" {
		return p
	}
	return DefaultNodeLockPath
}

// NodeLock is the held lock.
type NodeLock struct {
	f *os.File
}

// LockHolder is who holds the lock, as the holder wrote it.
type LockHolder struct {
	PID      int    `json:"pid"`
	Command  string `json:"command"`
	Checkout string `json:"checkout"`
	// Started is when the holder process started; StartTime the same in clock ticks after boot.
	Started   string `json:"started"`
	StartTime uint64 `json:"startTime"`
}

func (h LockHolder) String() string {
	if h.PID == 0 {
		return "a process that has not written its name yet"
	}
	return fmt.Sprintf("pid %d (%s), checkout %s, started %s", h.PID, h.Command, h.Checkout, h.Started)
}

// LockedError is the refusal: another process holds the lock.
type LockedError struct {
	Path   string
	Holder LockHolder
	Waited time.Duration
	// Others are the processes that hold the lock open when the holder is gone (the node's components outlived
	// it), as "pid N (program)".
	Others []string
}

func (e *LockedError) Error() string {
	waited := ""
	if e.Waited > 0 {
		waited = fmt.Sprintf(" (waited %v)", e.Waited)
	}
	if len(e.Others) > 0 {
		return fmt.Sprintf("another real node runs on this machine%s: %s is held by processes that outlived their "+
			"node's own (%s): %s; one real node at a time (two would kill each other's containers): end them (the "+
			"lock goes with the last)", waited, e.Path, e.Holder, strings.Join(e.Others, ", "))
	}
	return fmt.Sprintf("another real node runs on this machine%s: %s is held by %s; one real node at a time "+
		"(two would kill each other's containers): stop that one (make cluster-down NODE=real in its checkout) or "+
		"let its tests end", waited, e.Path, e.Holder)
}

// lockedError describes who holds the lock that f is open on.
func lockedError(path string, f *os.File, waited time.Duration) *LockedError {
	e := &LockedError{Path: path, Holder: readHolder(f), Waited: waited}
	if e.Holder.PID == 0 {
		return e
	}
	if info, err := readProc(e.Holder.PID); err == nil && info.startTime == e.Holder.StartTime {
		return e
	}
	e.Others = openersOf(path)
	return e
}

// openersOf lists the processes (at most 5) with path open, as far as /proc lets this process see.
func openersOf(path string) []string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && target == path {
				if info, err := readProc(pid); err == nil {
					found = append(found, fmt.Sprintf("pid %d (%s)", pid, filepath.Base(strings.Fields(info.command + " ?")[0])))
				}
				break
			}
		}
		if len(found) == 5 {
			break
		}
	}
	return found
}

// LockNode takes the lock at path. When another process holds it, it waits up to wait (none when 0), polling,
// after telling progress once who holds it; then it returns a *LockedError. The lock is written with the caller's
// identity.
func LockNode(path string, wait time.Duration, progress io.Writer) (*NodeLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			l := &NodeLock{f: f}
			if err := l.Announce(); err != nil {
				_ = f.Close()
				return nil, err
			}
			return l, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		if time.Since(start) >= wait {
			e := lockedError(path, f, wait)
			_ = f.Close()
			return nil, e
		}
		if !told && progress != nil {
			_, _ = fmt.Fprintf(progress, "waiting up to %v for the real node of %s to end (%s)\n", wait, readHolder(f), path)
			told = true
		}
		time.Sleep(min(500*time.Millisecond, wait-time.Since(start)))
	}
}

// AdoptNodeLock takes over the lock a parent passed down (its descriptor in $WEBAPP_REALNODE_LOCK_FD), checking
// that the descriptor is the lock file at path and still holds the lock; without one it takes the lock itself,
// without waiting.
func AdoptNodeLock(path string) (*NodeLock, error) {
	v := os.Getenv(lockFDEnv)
	if v == "" {
		return LockNode(path, 0, nil)
	}
	fd, err := strconv.Atoi(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", lockFDEnv, v, err)
	}
	// Not for this process's children (the kubelet, containerd and its shims would hold the lock too).
	syscall.CloseOnExec(fd)
	_ = os.Unsetenv(lockFDEnv)
	f := os.NewFile(uintptr(fd), path)
	var got, want syscall.Stat_t
	if err := syscall.Fstat(fd, &got); err != nil {
		return nil, fmt.Errorf("%s=%d: %w", lockFDEnv, fd, err)
	}
	if err := syscall.Stat(path, &want); err != nil {
		return nil, err
	}
	if got.Dev != want.Dev || got.Ino != want.Ino {
		return nil, fmt.Errorf("%s=%d is not the lock file %s", lockFDEnv, fd, path)
	}
	// On the descriptor that holds it this succeeds at once; if it does not hold it, whoever does is refused.
	if err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		e := lockedError(path, f, 0)
		_ = f.Close()
		return nil, e
	}
	l := &NodeLock{f: f}
	if err := l.Announce(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return l, nil
}

// Announce writes the calling process's identity into the lock file.
func (l *NodeLock) Announce() error {
	self, err := SelfRecord()
	if err != nil {
		return err
	}
	b, err := json.Marshal(LockHolder{PID: self.PID, Command: self.Command, Checkout: RepoRoot(),
		Started: startedAt(self.StartTime), StartTime: self.StartTime})
	if err != nil {
		return err
	}
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	_, err = l.f.WriteAt(append(b, '\n'), 0)
	return err
}

// Inherit prepares cmd to inherit the lock: the child's AdoptNodeLock takes it over. The lock is then released only
// when both have closed it (or exited).
func (l *NodeLock) Inherit(env []string, files []*os.File) ([]string, []*os.File) {
	// ExtraFiles[i] is descriptor 3+i in the child.
	return append(env, fmt.Sprintf("%s=%d", lockFDEnv, 3+len(files))), append(files, l.f)
}

// Release closes this process's descriptor. It never unlocks explicitly: a child that inherited the lock keeps it
// until it exits too.
func (l *NodeLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// readHolder reads the identity in the lock file.
func readHolder(f *os.File) LockHolder {
	var h LockHolder
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<16))
	if err == nil {
		_ = json.Unmarshal([]byte(strings.TrimSpace(string(b))), &h)
	}
	return h
}
