package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// process is a component the harness started itself.
type process struct {
	name string
	done chan struct{} // closed when it has exited for good (not to be started again)

	mu       sync.Mutex
	cmd      *exec.Cmd // the current run
	stopping bool      // stop has begun: no exit is started again
}

// restartOn says, per component, the words in its log of an abort after which it is started again; any other exit
// stays an exit. kwok's: what the Go runtime prints when kwok aborts in its known race (kwok v0.8.0 builds each
// stage's CEL environment lazily from several workers at once, and easycel v0.6.0, the latest there is, caches
// types in global maps without a lock). It happens while the first node or pods are matched (CI saw it once, as
// the fake node registered). kwok keeps no state of its own: started again it lists and goes on, as its
// Deployment's restart would on a cluster.
var restartOn = map[string][]byte{"kwok": []byte("fatal error: concurrent map")}

// raceRestarts bounds how often one component is started again after such an abort.
const raceRestarts = 3

// startProcess runs bin/name with args, its output in LogDir/name.log.
func (c *Cluster) startProcess(name string, args []string, dieWithParent bool) error {
	return c.startPath(name, filepath.Join(c.Bin, name), args, dieWithParent)
}

// startPath runs the binary at path with args, its output in LogDir/name.log. It is started again after an abort
// restartOn names for it.
func (c *Cluster) startPath(name, path string, args []string, dieWithParent bool) error {
	logPath := filepath.Join(c.LogDir, name+".log")
	abort := restartOn[name]
	start := func() (*exec.Cmd, error) {
		out, err := logFile(c.LogDir, name+".log")
		if err != nil {
			return nil, err
		}
		// The child holds its own copy of the log's descriptor.
		defer func() { _ = out.Close() }()
		cmd := exec.Command(path, args...)
		cmd.Stdout, cmd.Stderr = out, out
		if c.real != nil {
			// Each of the real node's components holds the machine's lock too: if the process that started them
			// dies without a teardown, no other real node starts while they run.
			cmd.ExtraFiles = []*os.File{c.real.lock.f}
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if dieWithParent {
			cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("starting %s: %w", name, err)
		}
		return cmd, nil
	}
	cmd, err := start()
	if err != nil {
		return err
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for restarts := 0; ; restarts++ {
			waitErr := cmd.Wait()
			p.mu.Lock()
			if p.stopping || abort == nil || restarts == raceRestarts || aborts(logPath, abort) <= restarts {
				p.mu.Unlock()
				return
			}
			// Said in its log, where whoever reads why kwok's output starts over looks.
			if f, err := logFile(c.LogDir, name+".log"); err == nil {
				// (Not quoting the abort's words: aborts counts them.)
				_, _ = fmt.Fprintf(f, "\n=== the test cluster: %s exited (%v) in a known abort; starting it again\n\n",
					name, waitErr)
				_ = f.Close()
			}
			next, err := start()
			if err != nil {
				p.mu.Unlock()
				return
			}
			p.cmd, cmd = next, next
			p.mu.Unlock()
		}
	}()
	c.procs = append(c.procs, p)
	return nil
}

// aborts counts the words of an abort in the log at path.
func aborts(path string, words []byte) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, words)
}

// stop terminates the process's current run (Terminate) and keeps it from being started again.
func (p *process) stop(grace time.Duration) {
	p.mu.Lock()
	p.stopping = true
	proc := p.cmd.Process
	p.mu.Unlock()
	Terminate(proc, p.done, grace)
}
