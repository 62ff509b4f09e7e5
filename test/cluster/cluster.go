package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// FakeNodeName is the node kwok simulates; pods scheduled there become Running and Ready within moments.
const FakeNodeName = "kwok-node-0"

// Options configure Start.
type Options struct {
	// Dir holds the kubeconfig and the components' logs; it is created if missing.
	Dir string
	// DieWithParent kills the components the harness starts itself when the calling process dies (tests set it;
	// the long-running local cluster of `make run` does not need it).
	DieWithParent bool
}

// Cluster is a running local cluster.
type Cluster struct {
	// Kubeconfig is the path of an admin kubeconfig for the cluster.
	Kubeconfig string
	// Config is the admin rest config.
	Config *rest.Config
	// LogDir holds one log file per component.
	LogDir string
	// Bin is the directory of the binaries (kubectl among them).
	Bin string

	env   *envtest.Environment
	procs []*exec.Cmd
}

// Start brings up etcd and kube-apiserver (through envtest, which also installs the WebApp CRD), then
// kube-controller-manager (Deployment, ReplicaSet, garbage-collector and namespace controllers), kube-scheduler
// and kwok, and registers one fake node. It returns once the node is Ready. On error everything started is
// stopped again.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	bin, err := ToolsBin()
	if err != nil {
		return nil, err
	}
	logDir := filepath.Join(opts.Dir, "logs")
	env, err := NewEnvtest(logDir)
	if err != nil {
		return nil, err
	}
	c = &Cluster{LogDir: logDir, Bin: bin, env: env, Kubeconfig: filepath.Join(opts.Dir, "kubeconfig")}
	defer func() {
		if err != nil {
			c.Stop()
			err = fmt.Errorf("%w (component logs in %s)", err, logDir)
		}
	}()
	if _, err = env.Start(); err != nil {
		return c, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return c, fmt.Errorf("creating the admin user: %w", err)
	}
	c.Config = admin.Config()
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return c, err
	}
	if err = os.WriteFile(c.Kubeconfig, kubeconfig, 0o600); err != nil {
		return c, err
	}

	kwokPort, err := freePort()
	if err != nil {
		return c, err
	}
	components := []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--controllers=deployment,replicaset,garbage-collector,namespace",
			"--leader-elect=false", "--secure-port=0",
			// The default 20 QPS makes a few hundred Deployments take minutes to become available.
			"--kube-api-qps=1000", "--kube-api-burst=2000",
		}},
		{"kube-scheduler", []string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0"}},
		{"kwok", []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--config=" + strings.Join(KwokStages(bin), ","),
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--node-ip=127.0.0.1",
			"--server-address=127.0.0.1:" + strconv.Itoa(kwokPort),
		}},
	}
	for _, comp := range components {
		if err = c.startProcess(comp.name, comp.args, opts.DieWithParent); err != nil {
			return c, err
		}
	}
	if err = c.registerFakeNode(ctx); err != nil {
		return c, err
	}
	return c, nil
}

// startProcess runs bin/name with args, its output in LogDir/name.log.
func (c *Cluster) startProcess(name string, args []string, dieWithParent bool) error {
	out, err := logFile(c.LogDir, name+".log")
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(c.Bin, name), args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if dieWithParent {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	return nil
}

// registerFakeNode creates a node that kwok manages and waits until kwok reports it Ready.
func (c *Cluster) registerFakeNode(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        FakeNodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels:      map[string]string{"kubernetes.io/hostname": FakeNodeName, "type": "kwok"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the fake node: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, c.exited()
	})
	if err != nil {
		return fmt.Errorf("waiting for the fake node to become Ready: %w", err)
	}
	return nil
}

// exited reports a component that is no longer running.
func (c *Cluster) exited() error {
	for _, p := range c.procs {
		if p.ProcessState != nil || p.Process.Signal(syscall.Signal(0)) != nil {
			return fmt.Errorf("%s exited; see %s", filepath.Base(p.Path), filepath.Join(c.LogDir, filepath.Base(p.Path)+".log"))
		}
	}
	return nil
}

// Stop stops every component, the ones started last first; each gets 10 s after SIGTERM before SIGKILL.
func (c *Cluster) Stop() error {
	var errs []error
	for i := len(c.procs) - 1; i >= 0; i-- {
		errs = append(errs, stopProcess(c.procs[i], 10*time.Second))
	}
	c.procs = nil
	if c.env != nil {
		errs = append(errs, c.env.Stop())
		c.env = nil
	}
	return errors.Join(errs...)
}

func stopProcess(cmd *exec.Cmd, grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
		return nil
	}
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
