// Command localcluster runs the local cluster of test/cluster (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and kwok with one fake node) in the background, for a first run without a cluster; or, with the
// node kind "real", the cluster with a real node (containerd, kubelet, kube-proxy) in a network and mount
// namespace of its own (enter it with hack/realnode.sh).
//
//	localcluster up [kwok|real]     start it unless it runs; print the kubeconfig path
//	localcluster down [kwok|real]   stop it
//	localcluster serve [kwok|real]  run it in the foreground until SIGINT or SIGTERM (what `up` starts)
//	localcluster kubeconfig [kwok|real]  print the path of its kubeconfig
//	localcluster pid [kwok|real]    print the pid of the serving process
//	localcluster exec real -- CMD...  run CMD in the real node's network namespace (what hack/realnode.sh does)
//
// Its state (kubeconfig, the serving process's record, component logs) lives in $WEBAPP_CLUSTER_DIR, by default
// ~/.cache/webapp-operator/cluster (cluster-real for the real node). Before it enters the namespace of the serving
// process or signals it, it checks that the process of the recorded pid is still the one that recorded it (its
// start time) and, for the real node, that its network namespace is the recorded one and not the caller's or the
// machine's; otherwise it refuses, and never falls back to the caller's namespace. `up ... real` takes the
// machine's real-node lock (see test/cluster/lock.go) and hands it to the serving process.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/example/webapp-operator/test/cluster"
)

func main() {
	execArgs := len(os.Args) > 4 && os.Args[1] == "exec" && os.Args[2] == "real" && os.Args[3] == "--"
	if !execArgs && (len(os.Args) < 2 || len(os.Args) > 3 || len(os.Args) == 3 && os.Args[2] != "kwok" && os.Args[2] != "real") {
		fmt.Fprintln(os.Stderr, "usage: localcluster up|down|serve|kubeconfig|pid [kwok|real]\n       localcluster exec real -- CMD [ARGS...]")
		os.Exit(2)
	}
	realNode := len(os.Args) >= 3 && os.Args[2] == "real"
	dir, err := stateDir(realNode)
	if err == nil {
		switch os.Args[1] {
		case "up":
			err = up(dir, realNode)
		case "down":
			err = down(dir, realNode)
		case "serve":
			err = serve(dir, realNode)
		case "kubeconfig":
			fmt.Println(filepath.Join(dir, "kubeconfig"))
		case "pid":
			err = printPID(dir, realNode)
		case "exec":
			err = execIn(dir, os.Args[4:])
		default:
			err = fmt.Errorf("unknown command %q: want up, down, serve, kubeconfig, pid or exec", os.Args[1])
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

// errNotRunning: no process has the recorded pid, or there is no record.
var errNotRunning = errors.New("the local cluster is not running")

// recordFile is where serve records itself.
func recordFile(dir string) string { return filepath.Join(dir, "pid") }

// serving returns the record of the cluster's serving process once it is verified to be that process (see
// cluster.VerifyProcess): errNotRunning when there is none; a *cluster.PIDReusedError when its pid now belongs to
// another process; another error when it cannot be trusted for another reason.
func serving(dir string, realNode bool) (cluster.ProcessRecord, error) {
	path := recordFile(dir)
	r, err := cluster.ReadProcessRecord(path)
	if errors.Is(err, os.ErrNotExist) {
		return r, errNotRunning
	}
	if err != nil {
		return r, fmt.Errorf("%w; nothing was entered or signalled (stop the cluster with the localcluster that "+
			"started it, or remove the file)", err)
	}
	err = cluster.VerifyProcess(r, realNode)
	if errors.Is(err, cluster.ErrNotRunning) {
		return r, errNotRunning
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w; nothing was entered or signalled", path, err)
	}
	return r, nil
}

// printPID prints the pid of the running cluster's serving process.
func printPID(dir string, realNode bool) error {
	r, err := serving(dir, realNode)
	if errors.Is(err, errNotRunning) {
		return errors.New("the local cluster is not running (make cluster-up)")
	}
	if err != nil {
		return err
	}
	fmt.Println(r.PID)
	return nil
}

// execIn runs argv in the real node's network namespace, in a mount namespace of its own where /etc/resolv.conf is
// the node's (so its name lookups stay on loopback too). The namespace is opened first and the process verified
// after: the descriptor is then the cluster's namespace even if the process dies the next moment.
func execIn(dir string, argv []string) error {
	r, err := serving(dir, true)
	if errors.Is(err, errNotRunning) {
		return errors.New("the cluster with a real node is not running (make cluster-up NODE=real)")
	}
	if err != nil {
		return err
	}
	// No O_CLOEXEC: nsenter, exec'd below, enters it through /proc/self/fd.
	fd, err := syscall.Open(fmt.Sprintf("/proc/%d/ns/net", r.PID), syscall.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("opening the network namespace of process %d: %w", r.PID, err)
	}
	if _, err := serving(dir, true); err != nil {
		return err
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return fmt.Errorf("refusing process %d: reading the namespace opened: %w", r.PID, err)
	}
	if ns != r.NetNS {
		return fmt.Errorf("refusing process %d: the namespace opened, %s, is not the recorded %s", r.PID, ns, r.NetNS)
	}
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		return err
	}
	args := []string{"nsenter", fmt.Sprintf("--net=/proc/self/fd/%d", fd), "--",
		"unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", `mount --bind "$1" /etc/resolv.conf && shift && exec "$@"`, "sh", filepath.Join(dir, "node", "resolv.conf")}
	return syscall.Exec(nsenter, append(args, argv...), os.Environ())
}

func up(dir string, realNode bool) error {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	_, err := serving(dir, realNode)
	var reused *cluster.PIDReusedError
	if errors.As(err, &reused) {
		fmt.Fprintf(os.Stderr, "the last local cluster is gone (%v); starting a new one\n", reused)
		err = errNotRunning
	}
	if err != nil && !errors.Is(err, errNotRunning) {
		return err
	}
	if err != nil {
		// One real node per machine: refused at once when another runs (the serving process keeps the lock).
		var lock *cluster.NodeLock
		if realNode {
			if lock, err = cluster.LockNode(cluster.NodeLockPath(), 0, nil); err != nil {
				return err
			}
			defer func() { _ = lock.Release() }()
		}
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
			cmd.Env, cmd.ExtraFiles = lock.Inherit(os.Environ(), nil)
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

// down sends the verified serving process SIGTERM (through a pidfd: the signal reaches that process or none) and
// waits until it has exited.
func down(dir string, realNode bool) error {
	r, err := serving(dir, realNode)
	var reused *cluster.PIDReusedError
	switch {
	case errors.Is(err, errNotRunning):
		fmt.Println("local cluster is not running")
		return nil
	case errors.As(err, &reused):
		fmt.Printf("local cluster is not running: %v\n", err)
		return os.Remove(recordFile(dir))
	case err != nil:
		return err
	}
	p, err := os.FindProcess(r.PID)
	if err != nil {
		return err
	}
	// Verified again now that p holds the process: p is the cluster's, or the signal goes nowhere.
	if _, err := serving(dir, realNode); err != nil {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone) {
			fmt.Println("local cluster stopped")
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("process %d did not stop within a minute", r.PID)
}

func serve(dir string, realNode bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := cluster.WriteProcessRecord(recordFile(dir)); err != nil {
		return err
	}
	defer func() { _ = os.Remove(recordFile(dir)) }()
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
		// The CRD is installed with its conversion webhook served by this process: a manager run from a
		// workstation (make run) has no address the API server could call.
		return cluster.Start(ctx, cluster.Options{Dir: dir, InstallCRD: true})
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
