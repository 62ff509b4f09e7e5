// Package e2e drives a whole local cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// with a fake node) the way users do: kubectl, and the manager binary built from this checkout.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

var (
	lc         *cluster.Cluster
	workDir    string // kubeconfig, all logs
	managerBin string // the manager binary
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	workDir, err = os.MkdirTemp("", "webapp-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if managerBin, err = cluster.Manager(workDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lc, err = cluster.Start(context.Background(), cluster.Options{Dir: workDir, DieWithParent: true, InstallCRD: true, Autoscaling: true})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting the local cluster: %v\n", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "e2e tests failed; manager and cluster logs are in %s\n", workDir)
	}
	if err := lc.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stopping the local cluster: %v\n", err)
	}
	return code
}

// kubectl runs the cluster's kubectl and returns its stdout; a failure fails the test with stderr.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlIn("", args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// kubectlIn runs kubectl with stdin and returns stdout, or an error carrying stderr.
func kubectlIn(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(lc.Bin, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+lc.Kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// jsonpathEquals polls until `kubectl get <obj> -o jsonpath=<path>` prints want; obj may hold several
// space-separated arguments ("-n=ns deployment/x").
func jsonpathEquals(t *testing.T, obj, path, want string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, obj+" "+path+" = "+want, func(context.Context) error {
		args := append([]string{"get"}, strings.Fields(obj)...)
		got, err := kubectlIn("", append(args, "-o", "jsonpath="+path)...)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("got %q", got)
		}
		return nil
	})
}

// waitDeleted waits until the objects (kind/name, in namespace ns) are gone, as garbage collection deletes them.
func waitDeleted(t *testing.T, ns string, objs ...string) {
	t.Helper()
	kubectl(t, append([]string{"wait", "-n", ns, "--for=delete", "--timeout=60s"}, objs...)...)
}

// manager is a running manager process.
type manager struct {
	cmd         *exec.Cmd
	metricsAddr string
	done        chan struct{}
}

// startManager runs the manager binary against the local cluster until stopped or the test ends.
func startManager(t *testing.T, name string, extraArgs ...string) *manager {
	t.Helper()
	metricsAddr, probeAddr := freeAddr(t), freeAddr(t)
	log, err := os.Create(filepath.Join(workDir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--kubeconfig=" + lc.Kubeconfig,
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + probeAddr,
		"--zap-log-level=debug",
		// The harness serves the CRD's conversion (cluster.StartConversion): a manager on loopback has no
		// Service the API server could call.
		"--webhook-port=0",
	}, extraArgs...)
	cmd := exec.Command(managerBin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &manager{cmd: cmd, metricsAddr: metricsAddr, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(m.done)
	}()
	t.Cleanup(func() { m.stop(t) })
	testutil.Eventually(t, 30*time.Second, name+" ready", func(context.Context) error {
		select {
		case <-m.done:
			return fmt.Errorf("manager exited; see %s", log.Name())
		default:
		}
		resp, err := http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz: %s", resp.Status)
		}
		// And the metrics server listens (HTTP or HTTPS): the two servers start apart, and tests read metrics at
		// once (on a busy machine /readyz answered before the metrics server listened).
		conn, err := net.DialTimeout("tcp", metricsAddr, time.Second)
		if err != nil {
			return fmt.Errorf("metrics server: %w", err)
		}
		return conn.Close()
	})
	return m
}

// stop sends SIGTERM and waits for the manager to exit.
func (m *manager) stop(t *testing.T) {
	t.Helper()
	if cluster.Terminate(m.cmd.Process, m.done, 30*time.Second) {
		t.Errorf("manager did not stop within 30s of SIGTERM")
	}
}

// metric is the sum of the samples of a Prometheus metric that carry all of labels, from /metrics.
func (m *manager) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + m.metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return testutil.MetricSum(slices.Collect(maps.Values(families)), name, labels)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// waitEstablished waits until each CRD is Established (testutil.WaitEstablished).
func waitEstablished(t *testing.T, crds ...string) {
	t.Helper()
	testutil.WaitEstablished(t, func(args ...string) (string, error) { return kubectlIn("", args...) }, crds...)
}
