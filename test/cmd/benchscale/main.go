// Command benchscale measures how the operator converges N WebApps beside U unrelated Deployments on the local
// cluster of test/cluster, and compares it with the floor: a minimal unthrottled client that applies only what is
// necessary, with the same concurrency, in a fresh cluster with the same load (`make bench-scale`; see
// docs/scale.md). It is a benchmark, not a test: nothing fails on a figure, CI does not run it.
//
// Every request of the manager and of the floor client goes through a counting proxy on loopback, so requests are
// counted by verb and resource as the API server receives them. The benchmark's own observer is one watch of
// WebApps (and, for the floor, a list of our Deployments every few seconds).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	webappv2ac "github.com/example/webapp-operator/applyconfig/apis/v2"
	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/test/cluster"
)

// namespace holds the unrelated Deployments and the operator's WebApps; floorNamespace the floor's, when the floor
// runs in the same cluster after the operator.
const (
	namespace      = metav1.NamespaceDefault
	floorNamespace = "floor"
)

type config struct {
	n, u, uReplicas, replicas, workers, runs int
	resync, timeout, quiet                   time.Duration
	manager                                  string
	managerArgs                              []string
	managerEnv                               map[string]string // GOMEMLIMIT, GOGC: the manager's, never the cluster's
	operator, floor, freshFloor              bool
	dir                                      string
}

func main() {
	var c config
	var args string
	flag.IntVar(&c.n, "n", 1000, "WebApps")
	flag.IntVar(&c.u, "u", 5000, "unrelated Deployments, created before the WebApps")
	flag.IntVar(&c.uReplicas, "u-replicas", 0, "replicas of each unrelated Deployment")
	flag.IntVar(&c.replicas, "replicas", 1, "replicas of each WebApp")
	flag.IntVar(&c.workers, "workers", 8, "--max-concurrent-reconciles of the manager, and the floor client's concurrency")
	flag.DurationVar(&c.resync, "resync", 10*time.Second, "--requeue-after of the manager; the rest is measured over three of them")
	flag.DurationVar(&c.timeout, "timeout", 3*time.Hour, "give up after this long (all runs)")
	flag.IntVar(&c.runs, "runs", 3, "measure this many times (fresh clusters each time) and print the median of each figure")
	flag.DurationVar(&c.quiet, "quiet", 5*time.Second, "the rest is measured once no Deployment of ours has changed for this long")
	flag.StringVar(&c.manager, "manager", "bin/manager", "the manager binary")
	flag.StringVar(&args, "args", "", "more manager flags, space-separated (--kube-api-qps=100 ...)")
	flag.BoolVar(&c.operator, "operator", true, "measure the operator")
	flag.BoolVar(&c.floor, "floor", true, "measure the floor")
	flag.BoolVar(&c.freshFloor, "fresh-floor", true, "measure the floor in a fresh cluster with the same load (false: in the operator's cluster, "+
		"in a namespace of its own after the operator was stopped: the same load plus the operator's idle objects, and one preload instead of two)")
	flag.StringVar(&c.dir, "dir", "", "where the clusters' logs and the manager's log go (default: a new temporary directory)")
	flag.Parse()
	c.managerArgs = strings.Fields(args)
	// GOMEMLIMIT and GOGC are the manager's alone: the cluster's components (kube-apiserver above all, whose heap
	// at N = 10,000 is several times the manager's limit) inherit this process's environment, and under the
	// manager's limit they spent most of their time collecting garbage.
	c.managerEnv = map[string]string{}
	for _, name := range []string{"GOMEMLIMIT", "GOGC"} {
		if v, set := os.LookupEnv(name); set {
			c.managerEnv[name] = v
			_ = os.Unsetenv(name)
		}
	}
	if _, set := c.managerEnv["GOMEMLIMIT"]; !set {
		// The manager runs with the soft memory limit the manifests give it (GOMEMLIMIT=off measures without).
		limit, err := manifestMemoryLimit("manifests/manager/deployment.yaml")
		if err != nil {
			fatal(err)
		}
		c.managerEnv["GOMEMLIMIT"] = limit
	}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "benchscale-")
		if err != nil {
			fatal(err)
		}
		c.dir = d
	}
	// The observer's cache would warn that no logger is set; the benchmark prints what it measures itself.
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := run(ctx, c); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchscale:", err)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, c config) error {
	fmt.Printf("benchscale: N=%d WebApps (%d replica each), U=%d unrelated Deployments (%d replicas), resync %s, workers %d, manager flags %q, %d runs; logs in %s\n",
		c.n, c.replicas, c.u, c.uReplicas, c.resync, c.workers, c.managerArgs, c.runs, c.dir)
	var rows []row
	for i := range max(c.runs, 1) {
		if c.runs > 1 {
			fmt.Printf("\n######## run %d of %d\n", i+1, c.runs)
		}
		r, err := runOnce(ctx, c, filepath.Join(c.dir, fmt.Sprintf("run-%d", i+1)))
		if err != nil {
			return err
		}
		if r != nil {
			rows = append(rows, *r)
		}
	}
	printRows(c, rows)
	return nil
}

// runOnce measures the operator and the floor once, in clusters under dir, and returns the table's row (nil
// without both).
func runOnce(ctx context.Context, c config, dir string) (*row, error) {
	printLoad("start")
	var op *opResult
	var fl *floorResult
	if c.operator {
		e, err := setup(ctx, c, filepath.Join(dir, "operator"))
		if err != nil {
			return nil, err
		}
		defer e.stop()
		if err := e.prepare(ctx, c, namespace); err != nil {
			return nil, err
		}
		if op, err = runOperator(ctx, c, e); err != nil {
			return nil, fmt.Errorf("operator: %w", err)
		}
		op.print(c)
		if c.floor && !c.freshFloor {
			if fl, err = measureFloor(ctx, c, e, floorNamespace, "the operator's cluster, namespace "+floorNamespace); err != nil {
				return nil, err
			}
		}
		e.stop()
	}
	if c.floor && (c.freshFloor || !c.operator) {
		e, err := setup(ctx, c, filepath.Join(dir, "floor"))
		if err != nil {
			return nil, err
		}
		defer e.stop()
		if fl, err = measureFloor(ctx, c, e, namespace, "a fresh cluster"); err != nil {
			return nil, err
		}
		e.stop()
	}
	printLoad("end")
	if op == nil || fl == nil {
		return nil, nil
	}
	r := &row{
		converged: op.converged, ready: op.ready, floor: fl.converged,
		writes: perApp(op.untilReady.total(true, false, false), c.n), requests: perApp(op.untilReady.total(true, true, false), c.n),
		rest: float64(op.restWrites.total(true, false, false)), restart: float64(op.restartWrites.total(true, false, false)),
		cpu: op.cpuPerAppResync.Seconds() * 1e6, rss: float64(op.peakRSS) / (1 << 20),
	}
	r.ratio = r.converged.Seconds() / r.floor.Seconds()
	fmt.Printf("\noperator / floor: converged %.2f (%s / %s), all Ready vs. the floor's Deployments available %.2f (%s / %s)\n",
		r.ratio, round(op.converged), round(fl.converged),
		op.ready.Seconds()/fl.available.Seconds(), round(op.ready), round(fl.available))
	fmt.Printf("table row: %s\n", r.format(c.n))
	return r, nil
}

// row is one run's figures, as the table of docs/scale.md has them.
type row struct {
	converged, ready, floor time.Duration
	ratio, writes, requests float64
	rest, restart, cpu, rss float64
}

func (r row) format(n int) string {
	return fmt.Sprintf("| %d | %s | %s | %s | %.2f | %.1f | %.1f | %.0f / %.0f | %.0f µs | %.0f MiB |",
		n, round(r.converged), round(r.ready), round(r.floor), r.ratio, r.writes, r.requests, r.rest, r.restart, r.cpu, r.rss)
}

// printRows prints every run's row and, for more than one, the median of each figure (each column on its own:
// the median row need not be one run's).
func printRows(c config, rows []row) {
	if len(rows) < 2 {
		return
	}
	fmt.Printf("\n== %d runs: N | converged | all Ready | floor | ratio | writes/WebApp | requests/WebApp | at rest / after restart | CPU per WebApp per resync | peak RSS\n", len(rows))
	for _, r := range rows {
		fmt.Println(r.format(c.n))
	}
	med := func(f func(row) float64) float64 {
		v := make([]float64, len(rows))
		for i, r := range rows {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	dur := func(f func(row) time.Duration) time.Duration {
		return time.Duration(med(func(r row) float64 { return float64(f(r)) }))
	}
	m := row{
		converged: dur(func(r row) time.Duration { return r.converged }), ready: dur(func(r row) time.Duration { return r.ready }),
		floor: dur(func(r row) time.Duration { return r.floor }), ratio: med(func(r row) float64 { return r.ratio }),
		writes: med(func(r row) float64 { return r.writes }), requests: med(func(r row) float64 { return r.requests }),
		rest: med(func(r row) float64 { return r.rest }), restart: med(func(r row) float64 { return r.restart }),
		cpu: med(func(r row) float64 { return r.cpu }), rss: med(func(r row) float64 { return r.rss }),
	}
	fmt.Printf("median: %s\n", m.format(c.n))
}

// measureFloor creates the WebApps of the floor in namespace ns of e's cluster and measures the floor there.
func measureFloor(ctx context.Context, c config, e *env, ns, where string) (*floorResult, error) {
	if err := e.prepare(ctx, c, ns); err != nil {
		return nil, err
	}
	fl, err := runFloor(ctx, c, e)
	if err != nil {
		return nil, fmt.Errorf("floor: %w", err)
	}
	fl.print(c, where)
	return fl, nil
}

// env is a loaded cluster with the counting proxy in front of it.
type env struct {
	cluster   *cluster.Cluster
	admin     client.Client // unthrottled, straight to the API server: loading and final checks
	cnt       *counter
	proxyURL  string
	proxyKube string // a kubeconfig of the proxy
	ns        string // where the WebApps being measured are
	obs       *observer
	apps      []*webappv1.WebApp
	stops     []func()
}

func (e *env) stop() {
	for i := len(e.stops) - 1; i >= 0; i-- {
		e.stops[i]()
	}
	e.stops = nil
}

// prepare creates N WebApps in namespace ns, with an observer of them.
func (e *env) prepare(ctx context.Context, c config, ns string) error {
	if ns != metav1.NamespaceDefault {
		if err := e.admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	e.ns = ns
	octx, stopObserver := context.WithCancel(ctx)
	e.stops = append(e.stops, stopObserver)
	var err error
	if e.obs, err = startObserver(octx, unthrottled(e.cluster.Config), ns, c.n); err != nil {
		return err
	}
	e.apps, err = createWebApps(ctx, c, e.admin, ns)
	return err
}

func setup(ctx context.Context, c config, dir string) (*env, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	logf("starting a local cluster in %s", dir)
	cl, err := cluster.Start(ctx, cluster.Options{Dir: dir, DieWithParent: true, InstallCRD: true, NodePods: 2*c.n*c.replicas + c.u*c.uReplicas + 100})
	if err != nil {
		return nil, err
	}
	e := &env{cluster: cl, cnt: &counter{}}
	e.stops = append(e.stops, func() { _ = cl.Stop() })
	ok := false
	defer func() {
		if !ok {
			e.stop()
		}
	}()
	kubectl := exec.CommandContext(ctx, filepath.Join(cl.Bin, "kubectl"), "--kubeconfig", cl.Kubeconfig, "apply", "--server-side",
		"-f", filepath.Join(cluster.RepoRoot(), "manifests", "crd", "example.com_webapps.yaml"))
	if out, err := kubectl.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("installing the CRD: %w: %s", err, out)
	}
	kubectl = exec.CommandContext(ctx, filepath.Join(cl.Bin, "kubectl"), "--kubeconfig", cl.Kubeconfig, "wait", "--for=condition=Established",
		"--timeout=60s", "crd/webapps.example.com")
	if out, err := kubectl.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("waiting for the CRD: %w: %s", err, out)
	}
	adminCfg := unthrottled(cl.Config)
	if e.admin, err = client.New(adminCfg, client.Options{Scheme: controller.NewScheme()}); err != nil {
		return nil, err
	}
	if err := loadUnrelated(ctx, c, e.admin); err != nil {
		return nil, err
	}
	url, stopProxy, err := startProxy(cl.Config, e.cnt)
	if err != nil {
		return nil, err
	}
	e.stops = append(e.stops, stopProxy)
	e.proxyURL = url
	e.proxyKube = filepath.Join(dir, "kubeconfig-proxy")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: url}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy", Namespace: namespace}
	kc.CurrentContext = "proxy"
	if err := clientcmd.WriteToFile(*kc, e.proxyKube); err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

func unthrottled(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	return cfg
}

// parallel runs f(0..n-1) on workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(context.Context, int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// loadUnrelated creates U Deployments without our label and waits until the Deployment and ReplicaSet controllers
// have seen them all, so their first sync overlaps the measurement less.
func loadUnrelated(ctx context.Context, c config, cl client.Client) error {
	start := time.Now()
	err := parallel(ctx, c.u, 16, func(ctx context.Context, i int) error {
		labels := map[string]string{"app": fmt.Sprintf("unrelated-%05d", i)}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unrelated-%05d", i), Namespace: namespace, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(int32(c.uReplicas)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/unrelated:1"}}},
				},
			},
		}
		return cl.Create(ctx, d)
	})
	if err != nil {
		return fmt.Errorf("creating unrelated Deployments: %w", err)
	}
	logf("created %d unrelated Deployments in %s; waiting for the Deployment controller to observe them", c.u, round(time.Since(start)))
	return wait.PollUntilContextCancel(ctx, 3*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &appsv1.DeploymentList{}
		if err := cl.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return false, nil
		}
		n := 0
		for i := range list.Items {
			d := &list.Items[i]
			if d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas == *d.Spec.Replicas {
				n++
			}
		}
		if n < c.u {
			return false, nil
		}
		// And the ReplicaSet controller has seen their ReplicaSets, so neither is still busy with them.
		rsList := &appsv1.ReplicaSetList{}
		if err := cl.List(ctx, rsList, client.InNamespace(namespace)); err != nil {
			return false, nil
		}
		n = 0
		for i := range rsList.Items {
			if rs := &rsList.Items[i]; rs.Status.ObservedGeneration >= rs.Generation {
				n++
			}
		}
		return n >= c.u, nil
	})
}

func createWebApps(ctx context.Context, c config, cl client.Client, ns string) ([]*webappv1.WebApp, error) {
	apps := make([]*webappv1.WebApp, c.n)
	err := parallel(ctx, c.n, 16, func(ctx context.Context, i int) error {
		app := &webappv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d", i), Namespace: ns},
			Spec:       webappv1.WebAppSpec{Image: "registry.example/app:1", Replicas: int32(c.replicas), Port: 8080},
		}
		apps[i] = app
		return cl.Create(ctx, app)
	})
	if err != nil {
		return nil, fmt.Errorf("creating WebApps: %w", err)
	}
	logf("created %d WebApps in namespace %s", c.n, ns)
	return apps, nil
}

// manager is a running manager process.
type manager struct {
	cmd         *exec.Cmd
	done        chan struct{}
	metricsAddr string
}

func startManager(c config, e *env, logName string) (*manager, error) {
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	m := &manager{metricsAddr: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{})}
	args := append([]string{
		"--kubeconfig=" + e.proxyKube,
		// The harness serves the CRD's conversion.
		"--webhook-port=0",
		"--metrics-bind-address=" + m.metricsAddr,
		"--health-probe-bind-address=0",
		fmt.Sprintf("--requeue-after=%s", c.resync),
		fmt.Sprintf("--max-concurrent-reconciles=%d", c.workers),
	}, c.managerArgs...)
	out, err := os.Create(filepath.Join(e.cluster.LogDir, logName))
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(c.manager, args...)
	m.cmd.Env = os.Environ()
	for name, v := range c.managerEnv {
		m.cmd.Env = append(m.cmd.Env, name+"="+v)
	}
	m.cmd.Stdout, m.cmd.Stderr = out, out
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", c.manager, err)
	}
	go func() {
		_ = m.cmd.Wait()
		_ = out.Close()
		close(m.done)
	}()
	e.stops = append(e.stops, func() { m.stop() })
	return m, nil
}

func (m *manager) stop() {
	cluster.Terminate(m.cmd.Process, m.done, 30*time.Second)
}

func (m *manager) exited() error {
	select {
	case <-m.done:
		return errors.New("the manager exited; see its log")
	default:
		return nil
	}
}

// opResult is what the operator did.
type opResult struct {
	converged, ready             time.Duration
	untilReady                   counts
	restWrites, restAll          counts
	restReconciles, restEnqueued float64
	restCPU, cpuPerAppResync     time.Duration
	restartWrites, restartAll    counts
	restartReconciles            float64
	peakRSS, restartPeakRSS      int64
	// podWatchAtRest and podWatchAfterRestart are webapp_operator_pod_watch_active then (1: the pods are watched).
	podWatchAtRest, podWatchAfterRestart float64
	rss, rssAnon, rssFile                int64 // at the end of the rest
	deployments, services                int
	coldCPU                              time.Duration
	restartSettled, restartSpent         time.Duration
	// settled is how long after all Ready the cluster settled (no Deployment of ours changing for -quiet).
	settled time.Duration
}

func runOperator(ctx context.Context, c config, e *env) (*opResult, error) {
	r := &opResult{}
	before := e.cnt.snapshot()
	logf("starting the manager cold")
	start := time.Now()
	m, err := startManager(c, e, "manager.log")
	if err != nil {
		return nil, err
	}
	if r.converged, err = e.obs.wait(ctx, start, m, false); err != nil {
		return nil, fmt.Errorf("waiting for convergence: %w", err)
	}
	logf("converged in %s", round(r.converged))
	if r.ready, err = e.obs.wait(ctx, start, m, true); err != nil {
		return nil, fmt.Errorf("waiting for Ready: %w", err)
	}
	r.untilReady = e.cnt.snapshot().minus(before)
	r.coldCPU = cpuTime(m.cmd.Process.Pid)
	logf("all Ready in %s", round(r.ready))
	if r.deployments, r.services, err = countChildren(ctx, e.admin, e.ns); err != nil {
		return nil, err
	}

	// At rest: three resyncs, once the cluster has settled (no Deployment of ours changing: the Deployment
	// controller's last status updates bring reconciles that are the cluster's settling, not the rest) and the
	// operator has: its queue empty, and a resync period and more since its last write (a WebApp just written to is
	// looked at once more by the next resync, which finds nothing to do: that look belongs to the cold start).
	lastWrites, lastWrite := int64(-1), time.Now()
	idle := func() bool {
		if w := writesOnly(e.cnt.snapshot()).total(true, false, false); w != lastWrites {
			lastWrites, lastWrite = w, time.Now()
		}
		return time.Since(lastWrite) > c.resync+2*time.Second && queued(m.metricsAddr) == 0
	}
	quietAfter, err := quiet(ctx, e.admin, e.ns, c.quiet, idle)
	if err != nil {
		return nil, fmt.Errorf("waiting for the Deployments to settle: %w", err)
	}
	r.settled = quietAfter
	logf("no Deployment of ours changed for %s, no write for a resync, the manager's queue empty (%s after all Ready)", c.quiet, round(quietAfter))
	s0, cpu0, rec0, enq0 := e.cnt.snapshot(), cpuTime(m.cmd.Process.Pid), reconciles(m.metricsAddr), resyncEnqueued(m.metricsAddr)
	logf("at rest for 3 resyncs (%s)", 3*c.resync)
	time.Sleep(3 * c.resync)
	rest := e.cnt.snapshot().minus(s0)
	r.restCPU = cpuTime(m.cmd.Process.Pid) - cpu0
	r.restReconciles = reconciles(m.metricsAddr) - rec0
	r.restEnqueued = resyncEnqueued(m.metricsAddr) - enq0
	r.restWrites, r.restAll = writesOnly(rest), rest
	r.cpuPerAppResync = r.restCPU / time.Duration(3*c.n)
	r.peakRSS = peakRSS(m.cmd.Process.Pid)
	r.podWatchAtRest = metricSum(m.metricsAddr, "webapp_operator_pod_watch_active ", "")
	r.rss, r.rssAnon, r.rssFile = procStatus(m.cmd.Process.Pid, "VmRSS"), procStatus(m.cmd.Process.Pid, "RssAnon"), procStatus(m.cmd.Process.Pid, "RssFile")
	if err := m.exited(); err != nil {
		return nil, err
	}
	m.stop()

	// A restart: every WebApp is reconciled once from a fresh cache, then one more resync.
	logf("restarting the manager")
	s1 := e.cnt.snapshot()
	start = time.Now()
	m, err = startManager(c, e, "manager-restart.log")
	if err != nil {
		return nil, err
	}
	err = wait.PollUntilContextCancel(ctx, time.Second, false, func(context.Context) (bool, error) {
		return reconciles(m.metricsAddr) >= float64(c.n), m.exited()
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the restarted manager to reconcile every WebApp: %w", err)
	}
	r.restartSettled = time.Since(start)
	time.Sleep(c.resync + 2*time.Second)
	restart := e.cnt.snapshot().minus(s1)
	r.restartWrites, r.restartAll = writesOnly(restart), restart
	r.restartReconciles = reconciles(m.metricsAddr)
	r.restartPeakRSS = peakRSS(m.cmd.Process.Pid)
	r.podWatchAfterRestart = metricSum(m.metricsAddr, "webapp_operator_pod_watch_active ", "")
	r.restartSpent = cpuTime(m.cmd.Process.Pid)
	m.stop()
	return r, nil
}

// quiet waits until no Deployment of ours in ns has changed (by resourceVersion) for period and idle holds, and
// returns how long that took. It lists their metadata straight from the API server (not through the counting proxy)
// every second.
func quiet(ctx context.Context, cl client.Client, ns string, period time.Duration, idle func() bool) (time.Duration, error) {
	start := time.Now()
	var last map[string]string
	since := start
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		deps := &metav1.PartialObjectMetadataList{}
		deps.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
		if err := cl.List(ctx, deps, client.InNamespace(ns), client.MatchingLabels{webappv2.LabelManagedBy: webappv2.ManagedBy}); err != nil {
			return false, nil
		}
		now := make(map[string]string, len(deps.Items))
		for _, d := range deps.Items {
			now[d.Name] = d.ResourceVersion
		}
		if !maps.Equal(now, last) {
			last, since = now, time.Now()
			return false, nil
		}
		return time.Since(since) >= period && idle(), nil
	})
	return time.Since(start) - period, err
}

func writesOnly(c counts) counts {
	out := counts{}
	for k, v := range c {
		if isWrite(k.verb) {
			out[k] = v
		}
	}
	return out
}

// countChildren counts our Deployments and Services (metadata only).
func countChildren(ctx context.Context, cl client.Client, ns string) (int, int, error) {
	sel := client.MatchingLabels{webappv2.LabelManagedBy: webappv2.ManagedBy}
	deps := &metav1.PartialObjectMetadataList{}
	deps.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
	if err := cl.List(ctx, deps, client.InNamespace(ns), sel); err != nil {
		return 0, 0, err
	}
	svcs := &metav1.PartialObjectMetadataList{}
	svcs.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceList"))
	if err := cl.List(ctx, svcs, client.InNamespace(ns), sel); err != nil {
		return 0, 0, err
	}
	return len(deps.Items), len(svcs.Items), nil
}

func (r *opResult) print(c config) {
	n := c.n
	fmt.Printf("\n== operator (manager flags %q, workers %d; GOMEMLIMIT %s, GOGC %s)\n", c.managerArgs, c.workers,
		envOr(c.managerEnv, "GOMEMLIMIT", "unset"), envOr(c.managerEnv, "GOGC", "unset: the manager's default"))
	fmt.Printf("converged (children exist, status observed): %s\n", round(r.converged))
	fmt.Printf("all Ready:                                   %s\n", round(r.ready))
	fmt.Printf("children: %d Deployments, %d Services with our label\n", r.deployments, r.services)
	fmt.Printf("requests per WebApp until all Ready: %.2f writes, %.2f reads, %.2f in all (events apart: %.2f)\n",
		perApp(r.untilReady.total(true, false, false), n), perApp(r.untilReady.total(false, true, false), n),
		perApp(r.untilReady.total(true, true, false), n), perApp(r.untilReady.total(true, true, true), n))
	printCounts(r.untilReady, n)
	fmt.Printf("manager CPU until all Ready: %s (%.2f ms per WebApp)\n", round(r.coldCPU), r.coldCPU.Seconds()*1e3/float64(n))
	fmt.Printf("settled (no Deployment of ours changed for a while, no write for a resync, the manager's queue empty) %s after all Ready\n", round(r.settled))
	fmt.Printf("at rest, 3 resyncs: %d writes (events apart), %d requests in all, %.0f reconciles (%.0f WebApps enqueued by the resync)\n",
		r.restWrites.total(true, false, false), r.restAll.total(true, true, false)+r.restAll.total(true, true, true), r.restReconciles, r.restEnqueued)
	printCounts(r.restAll, 0)
	fmt.Printf("manager CPU at rest: %s: %.1f µs per WebApp per resync", round(r.restCPU), r.cpuPerAppResync.Seconds()*1e6)
	if r.restReconciles > 0 {
		fmt.Printf(" (%.1f µs per reconcile)", r.restCPU.Seconds()*1e6/r.restReconciles)
	}
	fmt.Println()
	fmt.Printf("after a restart (every WebApp reconciled in %s, then one resync): %d writes (events apart), %.0f reconciles\n",
		round(r.restartSettled), r.restartWrites.total(true, false, false), r.restartReconciles)
	printCounts(r.restartAll, 0)
	fmt.Printf("peak RSS (VmHWM): %.1f MiB cold start and rest, %.1f MiB after a restart; %.1f KiB per WebApp (cold)\n",
		float64(r.peakRSS)/(1<<20), float64(r.restartPeakRSS)/(1<<20), float64(r.peakRSS)/1024/float64(n))
	fmt.Printf("pod watch (webapp_operator_pod_watch_active): %.0f at rest (it outlives the last rollout by a minute), %.0f after the restart\n",
		r.podWatchAtRest, r.podWatchAfterRestart)
	fmt.Printf("RSS at rest: %.1f MiB (%.1f MiB anonymous, %.1f MiB of files: the binary's pages)\n",
		float64(r.rss)/(1<<20), float64(r.rssAnon)/(1<<20), float64(r.rssFile)/(1<<20))
}

// floorResult is what the minimal client did.
type floorResult struct {
	converged, available, sent time.Duration
	all                        counts
}

// runFloor applies, with the manager's concurrency and no client-side throttling, exactly the necessary objects:
// each WebApp's Deployment (same replicas) and Service, then one status apply.
func runFloor(ctx context.Context, c config, e *env) (*floorResult, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", e.proxyKube)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(unthrottled(cfg), client.Options{Scheme: controller.NewScheme()})
	if err != nil {
		return nil, err
	}
	r := &floorResult{}
	before := e.cnt.snapshot()
	logf("floor: applying with %d workers", c.workers)
	start := time.Now()
	owner := client.FieldOwner("benchscale-floor")
	err = parallel(ctx, len(e.apps), c.workers, func(ctx context.Context, i int) error {
		app := e.apps[i]
		if err := cl.Apply(ctx, floorDeployment(app), owner, client.ForceOwnership); err != nil {
			return err
		}
		if err := cl.Apply(ctx, floorService(app), owner, client.ForceOwnership); err != nil {
			return err
		}
		return cl.Status().Apply(ctx, floorStatus(app, start), owner, client.ForceOwnership)
	})
	if err != nil {
		return nil, err
	}
	r.sent = time.Since(start)
	if r.converged, err = e.obs.wait(ctx, start, nil, false); err != nil {
		return nil, err
	}
	r.all = e.cnt.snapshot().minus(before)
	logf("floor converged in %s; waiting for its Deployments to be available", round(r.converged))
	err = wait.PollUntilContextCancel(ctx, 3*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &appsv1.DeploymentList{}
		if err := e.admin.List(ctx, list, client.InNamespace(e.ns), client.MatchingLabels{webappv2.LabelManagedBy: webappv2.ManagedBy}); err != nil {
			return false, nil
		}
		n := 0
		for i := range list.Items {
			d := &list.Items[i]
			if d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.UpdatedReplicas == *d.Spec.Replicas {
				n++
			}
		}
		return n >= c.n, nil
	})
	if err != nil {
		return nil, err
	}
	r.available = time.Since(start)
	return r, nil
}

func (r *floorResult) print(c config, where string) {
	fmt.Printf("\n== floor (unthrottled, %d workers: Deployment, Service, one status apply per WebApp; in %s)\n", c.workers, where)
	fmt.Printf("all applies returned:           %s\n", round(r.sent))
	fmt.Printf("converged (status observed):    %s\n", round(r.converged))
	fmt.Printf("all Deployments available:      %s (checked every 3 s)\n", round(r.available))
	fmt.Printf("requests per WebApp: %.2f\n", perApp(r.all.total(true, true, false), c.n))
	printCounts(r.all, c.n)
}

func perApp(v int64, n int) float64 { return float64(v) / float64(n) }

func round(d time.Duration) time.Duration {
	if d > 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// printCounts prints counts by verb and resource, per WebApp when n > 0.
func printCounts(c counts, n int) {
	keys := make([]reqKey, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sortKeys(keys)
	for _, k := range keys {
		if n > 0 {
			fmt.Printf("    %-8s %-28s %8d  %6.3f per WebApp\n", k.verb, k.resource, c[k], perApp(c[k], n))
		} else {
			fmt.Printf("    %-8s %-28s %8d\n", k.verb, k.resource, c[k])
		}
	}
}

// floorStatus is a status that observes the WebApp's generation.
func floorStatus(app *webappv1.WebApp, now time.Time) *webappv2ac.WebAppApplyConfiguration {
	return webappv2ac.WebApp(app.Name, app.Namespace).WithStatus(webappv2ac.WebAppStatus().
		WithObservedGeneration(app.Generation).
		WithConditions(metav1ac.Condition().
			WithType(webappv1.ConditionReady).WithStatus(metav1.ConditionFalse).WithReason(webappv2.ReasonDeploymentProgressing).
			WithMessage("Deployment rollout in progress").WithObservedGeneration(app.Generation).WithLastTransitionTime(metav1.NewTime(now))))
}

func floorLabels(app *webappv1.WebApp) map[string]string {
	return map[string]string{webappv2.LabelName: "webapp", webappv2.LabelInstance: app.Name, webappv2.LabelManagedBy: webappv2.ManagedBy}
}

func floorOwner(app *webappv1.WebApp) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().WithAPIVersion(webappv1.GroupVersion.String()).WithKind("WebApp").WithName(app.Name).
		WithUID(app.UID).WithController(true).WithBlockOwnerDeletion(true)
}

// floorDeployment is the WebApp's Deployment in short: same replicas, labels and owner, one container and port.
func floorDeployment(app *webappv1.WebApp) *appsv1ac.DeploymentApplyConfiguration {
	sel := map[string]string{webappv2.LabelName: "webapp", webappv2.LabelInstance: app.Name}
	return appsv1ac.Deployment(app.Name, app.Namespace).WithLabels(floorLabels(app)).WithOwnerReferences(floorOwner(app)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(app.Spec.Replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(sel)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(floorLabels(app)).WithSpec(corev1ac.PodSpec().
				WithContainers(corev1ac.Container().WithName("app").WithImage(app.Spec.Image).
					WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(app.Spec.Port).WithProtocol(corev1.ProtocolTCP))))))
}

func floorService(app *webappv1.WebApp) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(app.Name, app.Namespace).WithLabels(floorLabels(app)).WithOwnerReferences(floorOwner(app)).
		WithSpec(corev1ac.ServiceSpec().
			WithSelector(map[string]string{webappv2.LabelName: "webapp", webappv2.LabelInstance: app.Name}).
			WithPorts(corev1ac.ServicePort().WithName("http").WithPort(app.Spec.Port).WithProtocol(corev1.ProtocolTCP)))
}

// manifestMemoryLimit is the GOMEMLIMIT the manager's container gets in the Deployment manifest at path.
func manifestMemoryLimit(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	dep := &appsv1.Deployment{}
	if err := yaml.Unmarshal(data, dep); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	for _, ctr := range dep.Spec.Template.Spec.Containers {
		for _, env := range ctr.Env {
			if env.Name == "GOMEMLIMIT" && env.Value != "" {
				return env.Value, nil
			}
		}
	}
	return "", fmt.Errorf("%s sets no GOMEMLIMIT", path)
}

// envOr is the manager's environment variable name, or def when unset.
func envOr(env map[string]string, name, def string) string {
	if v, ok := env[name]; ok {
		return v
	}
	return def
}
