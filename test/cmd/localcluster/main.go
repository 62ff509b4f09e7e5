// Command localcluster runs the local cluster of test/cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with one fake node) in the background, for a first run without a cluster; or, with the
// node kind "real", the cluster with a real node (containerd, kubelet, kube-proxy) in a network and mount
// namespace of its own (enter it with hack/realnode.sh).
//
//	localcluster up [kwok|real]     start it unless it runs; print the kubeconfig path
//	localcluster down [kwok|real]   stop it
//	localcluster serve [kwok|real]  run it in the foreground until SIGINT or SIGTERM (what `up` starts)
//	localcluster kubeconfig [kwok|real]  print the path of its kubeconfig
//	localcluster pid [kwok|real]    print the pid of the serving process (hack/realnode.sh enters its namespace)
//
// Its state (kubeconfig, pid, component logs) lives in $WEBAPP_CLUSTER_DIR, by default
// ~/.cache/webapp-operator/cluster (cluster-real for the real node).
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
	if len(os.Args) < 2 || len(os.Args) > 3 || len(os.Args) == 3 && os.Args[2] != "kwok" && os.Args[2] != "real" {
		fmt.Fprintln(os.Stderr, "usage: localcluster up|down|serve|kubeconfig|pid [kwok|real]")
		os.Exit(2)
	}
	realNode := len(os.Args) == 3 && os.Args[2] == "real"
	dir, err := stateDir(realNode)
	if err == nil {
		switch os.Args[1] {
		case "up":
			err = up(dir, realNode)
		case "down":
			err = down(dir)
		case "serve":
			err = serve(dir, realNode)
		case "kubeconfig":
			fmt.Println(filepath.Join(dir, "kubeconfig"))
		case "pid":
			err = printPID(dir)
		default:
			err = fmt.Errorf("unknown command %q: want up, down, serve, kubeconfig or pid", os.Args[1])
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func stateDir(realNode bool) (string, error) {
	if d := os.Getenv("WEBAPP_CLUSTER_DIR"); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	if realNode {
		return filepath.Join(home, ".cache", "webapp-operator", "cluster-real"), nil
	}
	return filepath.Join(home, ".cache", "webapp-operator", "cluster"), nil
}

// printPID prints the pid of the running cluster's serving process.
func printPID(dir string) error {
	pid, ok := running(dir)
	if !ok {
		return errors.New("the local cluster is not running (make cluster-up)")
	}
	fmt.Println(pid)
	return nil
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

func up(dir string, realNode bool) error {
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
		if realNode {
			// The images are built out here (the builds fetch Go modules); the node's namespace has no network.
			if _, err := cluster.BuildImages(filepath.Join(dir, "images")); err != nil {
				return err
			}
			cmd = cluster.InNamespaceCommand(false, self, "serve", "real")
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, log, log
		// A session of its own, so the cluster outlives this command and the terminal it ran in.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			return err
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		node := "kwok"
		if realNode {
			node = "containerd, kubelet, kube-proxy"
		}
		fmt.Fprintf(os.Stderr, "starting the local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, %s)...\n", node)
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
	if realNode {
		fmt.Printf("it answers only inside its namespace: hack/realnode.sh kubectl get nodes, hack/realnode.sh curl ...\n")
		fmt.Printf("stop it with: make cluster-down NODE=real\n")
		return nil
	}
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

func serve(dir string, realNode bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	defer func() { _ = os.Remove(filepath.Join(dir, "pid")) }()
	c, err := start(ctx, dir, realNode)
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

// start starts the kwok cluster, or the real node's with the images `up` built.
func start(ctx context.Context, dir string, realNode bool) (*cluster.Cluster, error) {
	if !realNode {
		return cluster.Start(ctx, cluster.Options{Dir: dir})
	}
	images, err := filepath.Glob(filepath.Join(dir, "images", "*.tar"))
	if err != nil {
		return nil, err
	}
	c, err := cluster.StartReal(ctx, cluster.Options{Dir: filepath.Join(dir, "node"), Images: images})
	if err != nil {
		return nil, err
	}
	for _, t := range c.Timings {
		fmt.Printf("%-24s %v\n", t.Step, t.Took.Round(100*time.Millisecond))
	}
	// Where people and hack/realnode.sh look for it.
	if err := os.Link(c.Kubeconfig, filepath.Join(dir, "kubeconfig")); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}
