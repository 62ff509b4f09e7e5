package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
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
	// Images are image tarballs (test/images/build.sh) to import into the real node's containerd (StartReal).
	Images []string
	// NodePods is how many pods the fake node takes (1000 when zero); a scale benchmark needs more.
	NodePods int
	// InstallCRD installs the WebApp CRD before kube-controller-manager starts, so its garbage collector knows
	// WebApps from the start: it discovers kinds added later only every 30 s, and until then never collects what
	// a deleted WebApp owned.
	InstallCRD bool
	// Autoscaling runs kube-controller-manager's HorizontalPodAutoscaler controller too (syncing every 2 s). The
	// cluster serves no metrics API: an HPA keeps its count within its bounds and says its metrics are missing.
	Autoscaling bool
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
	// Timings are the durations of StartReal's steps.
	Timings []Timing

	env   *envtest.Environment
	procs []*process
	real  *realNode // the real node's state, for its teardown; nil with kwok
	// stopConversion stops the WebApp conversion webhook this process serves for the CRD it installed.
	stopConversion context.CancelFunc
}

// Start brings up etcd and kube-apiserver (through envtest), then kube-controller-manager (the Deployment,
// ReplicaSet, garbage-collector, namespace, disruption, ClusterRole-aggregation, PersistentVolume binder and claim
// and volume protection controllers, and the HPA's with Options.Autoscaling), kube-scheduler and kwok, and registers one fake node. It returns once the
// node is Ready. On error everything started is stopped again.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	bin, err := ToolsBin()
	if err != nil {
		return nil, err
	}
	logDir := filepath.Join(opts.Dir, "logs")
	// The CRD is left to the user (kubectl apply --server-side -f manifests/crd), as on any cluster, unless asked.
	env, err := NewEnvtest(logDir, opts.InstallCRD)
	if err != nil {
		return nil, err
	}
	c = &Cluster{LogDir: logDir, Bin: bin, env: env, Kubeconfig: filepath.Join(opts.Dir, "kubeconfig")}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
			err = fmt.Errorf("%w (component logs in %s)", err, logDir)
		}
	}()
	if _, err = env.Start(); err != nil {
		return c, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	if opts.InstallCRD {
		var convCtx context.Context
		convCtx, c.stopConversion = context.WithCancel(context.Background())
		if err = StartConversion(convCtx, env); err != nil {
			return c, err
		}
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

	controllers := "deployment-controller,replicaset-controller,garbage-collector-controller,namespace-controller,disruption-controller,clusterrole-aggregation-controller," +
		"persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller"
	if opts.Autoscaling {
		controllers += ",horizontal-pod-autoscaler-controller"
	}
	kwokPort, err := FreePort()
	if err != nil {
		return c, err
	}
	components := []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", []string{
			"--kubeconfig=" + c.Kubeconfig,
			// The PersistentVolume binder binds claims to the volumes a test creates (no provisioner), so pods mounting
			// them can be scheduled; the claim and volume protection controllers remove the finalizers the API server
			// puts on both (a claim in use by a scheduled pod stays until that pod is gone, as on any cluster).
			"--controllers=" + controllers, "--horizontal-pod-autoscaler-sync-period=2s",
			"--leader-elect=false", "--secure-port=0",
			// The default 20 QPS makes a few hundred Deployments take minutes to become available.
			"--kube-api-qps=1000", "--kube-api-burst=2000",
		}},
		{"kube-scheduler", []string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0"}},
		{"kwok", []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--config=" + strings.Join(KwokStages(), ","),
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
	if err = c.registerFakeNode(ctx, opts.NodePods); err != nil {
		return c, err
	}
	if err = c.checkDeploymentsBecomeAvailable(ctx); err != nil {
		return c, err
	}
	return c, nil
}

// registerFakeNode creates a node that kwok manages and waits until kwok reports it Ready.
func (c *Cluster) registerFakeNode(ctx context.Context, pods int) error {
	if pods <= 0 {
		pods = 1000
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(int64(pods), resource.DecimalSI),
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
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, Patience(60*time.Second), true, func(ctx context.Context) (bool, error) {
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
	// The API server taints a new node not-ready; the node-lifecycle controller, which would lift the taint, is
	// not run (it would also judge the fake node by kubelet heartbeats), so lift it here.
	// kwok updates the node's status meanwhile: retry on conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Spec.Taints = nil
		_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("removing the fake node's taints: %w", err)
	}
	return nil
}

// checkDeploymentsBecomeAvailable proves the cluster works end to end before anyone uses it: a one-replica
// Deployment is scheduled onto the fake node, made Ready by kwok and reported available by the Deployment
// controller; then garbage collection removes its ReplicaSet and pod.
func (c *Cluster) checkDeploymentsBecomeAvailable(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	labels := map[string]string{"app": "cluster-check"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-check", Namespace: metav1.NamespaceSystem},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "check", Image: "check"}}},
			},
		},
	}
	deps := cs.AppsV1().Deployments(metav1.NamespaceSystem)
	if _, err := deps.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating the check Deployment: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, Patience(60*time.Second), true, func(ctx context.Context) (bool, error) {
		d, err := deps.Get(ctx, dep.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return d.Status.AvailableReplicas == 1, c.exited()
	})
	if err != nil {
		return fmt.Errorf("waiting for a Deployment to become available (controller-manager, scheduler and kwok): %w", err)
	}
	return deps.Delete(ctx, dep.Name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
}

// exited reports a component that is no longer running, naming its log.
func (c *Cluster) exited() error {
	for _, p := range c.procs {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited; see %s", p.name, filepath.Join(c.LogDir, p.name+".log"))
		default:
		}
	}
	return nil
}

// Stop stops every component, the ones started last first; each gets 10 s after SIGTERM before SIGKILL.
func (c *Cluster) Stop() error {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(10 * time.Second)
	}
	c.procs = nil
	if c.stopConversion != nil {
		c.stopConversion()
		c.stopConversion = nil
	}
	if c.real != nil {
		err := c.real.teardown()
		c.real = nil
		return err
	}
	if c.env == nil {
		return nil
	}
	err := c.env.Stop()
	c.env = nil
	return err
}

// Terminate sends proc SIGTERM and waits until done is closed, killing it after grace; it reports whether it had to
// kill. A process that has already exited (done closed) is left alone.
func Terminate(proc *os.Process, done <-chan struct{}, grace time.Duration) (killed bool) {
	select {
	case <-done:
		return false
	default:
	}
	_ = proc.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return false
	case <-time.After(grace):
		_ = proc.Kill()
		<-done
		return true
	}
}

// FreePort asks the kernel for a free loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	return port, l.Close()
}
