// Command localcluster runs the local cluster of test/cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with one fake node) in the background, for a first run without a cluster.
//
//	localcluster up     start it unless it runs; print the kubeconfig path
//	localcluster down   stop it
//	localcluster serve  run it in the foreground until SIGINT or SIGTERM (what `up` starts)
//	localcluster kubeconfig  print the path of its kubeconfig
//
// Its state (kubeconfig, pid, component logs) lives in $WEBAPP_CLUSTER_DIR, by default
// ~/.cache/webapp-operator/cluster.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/example/webapp-operator/test/cluster"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: localcluster up|down|serve|kubeconfig")
		os.Exit(2)
	}
	dir, err := stateDir()
	if err == nil {
		switch os.Args[1] {
		case "up":
			err = up(dir)
		case "down":
			err = down(dir)
		case "serve":
			err = serve(dir)
		case "kubeconfig":
			fmt.Println(filepath.Join(dir, "kubeconfig"))
		default:
			err = fmt.Errorf("unknown command %q: want up, down, serve or kubeconfig", os.Args[1])
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func stateDir() (string, error) {
	if d := os.Getenv("WEBAPP_CLUSTER_DIR"); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".cache", "webapp-operator", "cluster"), nil
}

// running returns the pid of the serving process when it is alive.
func running(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	return pid, true
}

func up(dir string) error {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if _, ok := running(dir); !ok {
		// Build the binaries first, in the foreground, so their progress shows (once; minutes on a cold cache).
		if _, err := cluster.ToolsBin(); err != nil {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		self, err := os.Executable()
		if err != nil {
			return err
		}
		log, err := os.Create(filepath.Join(dir, "serve.log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(self, "serve")
		cmd.Stdout, cmd.Stderr = log, log
		// A session of its own, so the cluster outlives this command and the terminal it ran in.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		fmt.Fprintln(os.Stderr, "starting the local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)...")
		deadline := time.After(5 * time.Minute)
	wait:
		for {
			select {
			case err := <-exited:
				return fmt.Errorf("the local cluster did not start (%w); see %s and %s", err, log.Name(), filepath.Join(dir, "logs"))
			case <-deadline:
				// Do not leave a half-started cluster behind: serve stops what it started on SIGTERM.
				_ = cmd.Process.Signal(syscall.SIGTERM)
				return fmt.Errorf("the local cluster is not ready after 5 minutes; see %s", log.Name())
			case <-time.After(200 * time.Millisecond):
				if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
					break wait
				}
			}
		}
	}
	fmt.Printf("local cluster is running; kubeconfig: %s\n", kubeconfig)
	fmt.Printf("use it with:  export KUBECONFIG=%s\n", kubeconfig)
	fmt.Printf("stop it with: make cluster-down\n")
	return nil
}

func down(dir string) error {
	pid, ok := running(dir)
	if !ok {
		fmt.Println("local cluster is not running")
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	for i := 0; i < 600; i++ {
		if syscall.Kill(pid, 0) != nil {
			fmt.Println("local cluster stopped")
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("process %d did not stop within a minute", pid)
}

func serve(dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	defer func() { _ = os.Remove(filepath.Join(dir, "pid")) }()
	c, err := cluster.Start(ctx, cluster.Options{Dir: dir})
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(filepath.Join(dir, "ready")) }()
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		return errors.Join(err, c.Stop())
	}
	fmt.Println("local cluster ready; kubeconfig", c.Kubeconfig)
	<-ctx.Done()
	fmt.Println("stopping the local cluster")
	return c.Stop()
}
