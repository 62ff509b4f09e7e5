package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The real node's addresses, all inside its own network namespace.
const (
	// RealNodeName is the name the kubelet registers.
	RealNodeName = "realnode"
	// NodeIP is the node's address, on its own interface in the namespace; the API server advertises it too.
	NodeIP = "10.199.0.1"
	// PodCIDR is the range of pod addresses (the node gets PodSubnet of it, on the bridge cni0).
	PodCIDR   = "10.244.0.0/16"
	podSubnet = "10.244.0.0/24"
	// ServiceCIDR is the range of ClusterIPs; its first address is the kubernetes Service.
	ServiceCIDR   = "10.0.0.0/24"
	kubernetesSvc = "10.0.0.1"
	apiServerPort = "6443"
	// containerdSocket is where the kubelet finds containerd (under a bind mount of the harness's own directory).
	containerdSocket = "/run/containerd/containerd.sock"
	// PauseImage is the pod sandbox image containerd is configured with; test/images/build.sh builds it.
	PauseImage = "registry.k8s.io/pause:3.10"
	// WebserverImage is the test web app (test/images/webserver).
	WebserverImage = "webapp-test/webserver:1"
)

// StartReal starts a cluster with a real node: etcd, kube-apiserver, kube-controller-manager and kube-scheduler,
// then containerd (Debian's, with runc and the CNI bridge), the images of opts.Images imported into it, a kubelet
// and kube-proxy (iptables mode). It runs only inside a private network and mount namespace (see
// InNamespaceCommand). It returns once a pod of the test web app has answered through its Service's ClusterIP.
// Each step's duration is in Timings. On error everything started is stopped and removed again.
func StartReal(ctx context.Context, opts Options) (c *Cluster, err error) {
	if err := requirePrivateNamespace(); err != nil {
		return nil, err
	}
	// Before anything is started or torn down: a refusal here leaves the other node's containers alone.
	lock, err := AdoptNodeLock(NodeLockPath())
	if err != nil {
		return nil, err
	}
	bin, err := ToolsBin()
	if err != nil {
		return nil, errors.Join(err, lock.Release())
	}
	logDir := filepath.Join(opts.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, errors.Join(err, lock.Release())
	}
	c = &Cluster{LogDir: logDir, Bin: bin, Kubeconfig: filepath.Join(opts.Dir, "kubeconfig"),
		real: &realNode{dir: opts.Dir, images: opts.Images, dieWithParent: opts.DieWithParent, lock: lock}}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
			err = fmt.Errorf("%w (component logs in %s)", err, logDir)
		}
	}()
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"network", func(context.Context) error { return setupNetwork() }},
		{"mounts", func(context.Context) error { return c.real.mount() }},
		{"control plane", c.startControlPlane},
		{"containerd and images", c.startContainerd},
		{"kubelet and kube-proxy", c.startNode},
		{"node ready", c.waitNodeReady},
		{"a Service answers", c.checkServiceAnswers},
	}
	for _, s := range steps {
		start := time.Now()
		if err = s.run(ctx); err != nil {
			return c, fmt.Errorf("real node, %s: %w", s.name, err)
		}
		c.Timings = append(c.Timings, Timing{Step: s.name, Took: time.Since(start)})
	}
	return c, nil
}

// Timing is how long one step of StartReal took.
type Timing struct {
	Step string
	Took time.Duration
}

// startControlPlane writes the certificates and kubeconfig, then starts etcd, kube-apiserver (waiting for
// /readyz), kube-controller-manager and kube-scheduler.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(NodeIP), net.ParseIP(kubernetesSvc)}
	p, err := newPKI(filepath.Join(c.real.dir, "pki"), ips)
	if err != nil {
		return err
	}
	c.real.pki = p
	if err := p.kubeconfig(c.Kubeconfig, "https://127.0.0.1:"+apiServerPort); err != nil {
		return err
	}
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	if err := c.startProcess("etcd", []string{
		"--data-dir=" + filepath.Join(c.real.dir, "etcd"), "--unsafe-no-fsync",
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=default=http://127.0.0.1:2380",
	}, c.real.dieWithParent); err != nil {
		return err
	}
	if err := c.startProcess("kube-apiserver", c.apiServerArgs(), c.real.dieWithParent); err != nil {
		return err
	}
	if err := c.waitAPIServer(ctx); err != nil {
		return err
	}
	for _, comp := range []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", []string{
			"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0",
			"--root-ca-file=" + p.path("ca.crt"), "--service-account-private-key-file=" + p.path("sa.key"),
			"--allocate-node-cidrs", "--cluster-cidr=" + PodCIDR, "--node-cidr-mask-size=24",
			"--service-cluster-ip-range=" + ServiceCIDR, "--kube-api-qps=1000", "--kube-api-burst=2000",
		}},
		{"kube-scheduler", []string{"--kubeconfig=" + c.Kubeconfig, "--leader-elect=false", "--secure-port=0"}},
	} {
		if err := c.startProcess(comp.name, comp.args, c.real.dieWithParent); err != nil {
			return err
		}
	}
	return nil
}

// apiServerArgs serve on every address of the namespace (it has no other traffic), advertise the node's address
// as the kubernetes Service's endpoint, sign service-account tokens and proxy to extension API servers
// (metrics-server's metrics.k8s.io) through the aggregation layer, as a real cluster's API server does.
func (c *Cluster) apiServerArgs() []string {
	p := c.real.pki
	return []string{
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0", "--secure-port=" + apiServerPort, "--advertise-address=" + NodeIP,
		"--tls-cert-file=" + p.path("apiserver.crt"), "--tls-private-key-file=" + p.path("apiserver.key"),
		"--client-ca-file=" + p.path("ca.crt"),
		"--kubelet-client-certificate=" + p.path("admin.crt"), "--kubelet-client-key=" + p.path("admin.key"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + p.path("sa.pub"), "--service-account-signing-key-file=" + p.path("sa.key"),
		"--service-cluster-ip-range=" + ServiceCIDR, "--authorization-mode=Node,RBAC", "--allow-privileged=true",
		// The node's name resolves nowhere in the namespace: reach the kubelet (logs, exec) at its address.
		"--kubelet-preferred-address-types=InternalIP",
		// The aggregation layer: the identity it proxies with, and the headers that carry the user to the extension.
		"--proxy-client-cert-file=" + p.path(frontProxyClient+".crt"), "--proxy-client-key-file=" + p.path(frontProxyClient+".key"),
		"--requestheader-client-ca-file=" + p.path("ca.crt"), "--requestheader-allowed-names=" + frontProxyClient,
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
	}
}

// waitAPIServer polls /readyz until the API server answers ok.
func (c *Cluster) waitAPIServer(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, Patience(60*time.Second), true, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", c.exited()
	})
}

// startContainerd writes containerd's and the CNI's configuration, starts containerd and imports the images.
func (c *Cluster) startContainerd(ctx context.Context) error {
	dir := c.real.dir
	cniConf := filepath.Join(dir, "cni", "net.d")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-realnode.conflist"), []byte(cniConfig), 0o644); err != nil {
		return err
	}
	config := filepath.Join(dir, "containerd.toml")
	if err := os.WriteFile(config, []byte(containerdConfig(dir, cniConf)), 0o644); err != nil {
		return err
	}
	if err := c.startPath("containerd", "/usr/bin/containerd", []string{"--config=" + config}, c.real.dieWithParent); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return exec.Command("ctr", "--address", containerdSocket, "version").Run() == nil, c.exited()
	})
	if err != nil {
		return fmt.Errorf("waiting for containerd: %w", err)
	}
	for _, img := range c.real.images {
		out, err := exec.CommandContext(ctx, "ctr", "--address", containerdSocket, "-n", "k8s.io", "images", "import", img).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing %s: %w\n%s", img, err, out)
		}
	}
	return nil
}

// containerdConfig: state and data in the harness's directory; restrict_oom_score_adj because this machine's
// capability bounding set lacks CAP_SYS_RESOURCE (runc fails with "can't get final child's PID from pipe"
// without it); cgroupfs, as the kubelet; our own pause image; Debian's CNI plugins. A pull of an image that was not
// imported fails at once: the registry's name is looked up on loopback (the node's resolv.conf), and its address,
// outside the node's ranges, has no route.
func containerdConfig(dir, cniConf string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, filepath.Join(dir, "containerd"), containerdSocket, PauseImage, cniConf)
}

// cniConfig puts pods on the bridge cni0, the node's gateway to them, with addresses of podSubnet.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "realnode",
  "plugins": [{
    "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "` + podSubnet + `"}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`

// startNode writes the kubelet's and kube-proxy's configuration and starts them.
func (c *Cluster) startNode(context.Context) error {
	dir := c.real.dir
	files := map[string]string{
		// The namespace's /etc/resolv.conf is the node's own (loopback only, see realNode.mount).
		"kubelet.yaml":    kubeletConfig(c.real.pki.path("ca.crt"), "/etc/resolv.conf"),
		"kube-proxy.yaml": kubeProxyConfig(c.Kubeconfig),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	if err := c.startProcess("kubelet", []string{
		"--config=" + filepath.Join(dir, "kubelet.yaml"), "--kubeconfig=" + c.Kubeconfig,
		"--hostname-override=" + RealNodeName, "--node-ip=" + NodeIP, "--v=1",
	}, c.real.dieWithParent); err != nil {
		return err
	}
	return c.startProcess("kube-proxy", []string{"--config=" + filepath.Join(dir, "kube-proxy.yaml"), "--v=1"}, c.real.dieWithParent)
}

// kubeletConfig: cgroup v1 and cgroupfs, as this machine has; no swap check; the node's resolv.conf (pods get its
// loopback nameserver: their own loopback); no iptables chains of its own (kube-proxy's are enough); no image
// garbage collection (the images were imported, none can be pulled again); webhook authentication and authorization
// against the API server.
func kubeletConfig(caFile, resolvConf string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
resolvConf: %s
makeIPTablesUtilChains: false
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "1%%", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
serializeImagePulls: false
`, containerdSocket, resolvConf, NodeIP, caFile)
}

// kubeProxyConfig: iptables mode; conntrack sysctls left alone (they are the machine's, not the namespace's).
func kubeProxyConfig(kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: %s}
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
`, kubeconfig, RealNodeName, PodCIDR)
}
