package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
)

// observer follows the WebApps with one watch and notes when all of them were first converged (status observed
// at the current generation, with the Deployment in place) and all Ready.
type observer struct {
	mu                    sync.Mutex
	n                     int
	observed, ready       map[string]bool
	observedAt, readyAt   time.Time
	observedAll, readyAll bool
}

func startObserver(ctx context.Context, cfg *rest.Config, ns string, n int) (*observer, error) {
	o := &observer{n: n, observed: map[string]bool{}, ready: map[string]bool{}}
	ca, err := cache.New(cfg, cache.Options{Scheme: controller.NewScheme(), DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	inf, err := ca.GetInformer(ctx, &webappv1.WebApp{})
	if err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    o.update,
		UpdateFunc: func(_, obj any) { o.update(obj) },
	}); err != nil {
		return nil, err
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the observer's cache did not sync")
	}
	return o, nil
}

func (o *observer) update(obj any) {
	app, ok := obj.(*webappv1.WebApp)
	if !ok {
		return
	}
	ready := meta.FindStatusCondition(app.Status.Conditions, webappv1.ConditionReady)
	observed := app.Status.ObservedGeneration == app.Generation && ready != nil && ready.ObservedGeneration == app.Generation &&
		(ready.Reason == webappv2.ReasonDeploymentProgressing || ready.Reason == webappv2.ReasonDeploymentReady)
	isReady := observed && ready.Status == metav1.ConditionTrue
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.observed[app.Name] = observed
	o.ready[app.Name] = isReady
	if !o.observedAll && count(o.observed) >= o.n {
		o.observedAll, o.observedAt = true, now
	}
	if !o.readyAll && count(o.ready) >= o.n {
		o.readyAll, o.readyAt = true, now
	}
}

func count(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// wait returns how long after start all WebApps were first converged (or Ready), failing early if m exits.
func (o *observer) wait(ctx context.Context, start time.Time, m *manager, ready bool) (time.Duration, error) {
	last := time.Now()
	for {
		o.mu.Lock()
		done, at, have := o.observedAll, o.observedAt, count(o.observed)
		if ready {
			done, at, have = o.readyAll, o.readyAt, count(o.ready)
		}
		o.mu.Unlock()
		if done {
			return at.Sub(start), nil
		}
		if m != nil {
			if err := m.exited(); err != nil {
				return 0, err
			}
		}
		if time.Since(last) > 30*time.Second {
			logf("  %d/%d after %s", have, o.n, round(time.Since(start)))
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%d/%d: %w", have, o.n, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cpuTime is the user and system CPU time of process pid so far (/proc/PID/stat, in clock ticks of 10 ms).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// peakRSS is the peak resident set size of process pid (VmHWM), in bytes.
func peakRSS(pid int) int64 { return procStatus(pid, "VmHWM") }

// procStatus is a size field of /proc/PID/status (VmHWM, VmRSS, RssAnon, RssFile), in bytes.
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// reconciles is the manager's controller_runtime_reconcile_total of the webapp controller, all results.
func reconciles(addr string) float64 {
	return metricSum(addr, "controller_runtime_reconcile_total{", `controller="webapp"`)
}

// resyncEnqueued is the manager's webapp_operator_resync_enqueued_total: WebApps the resync brought back.
func resyncEnqueued(addr string) float64 {
	return metricSum(addr, "webapp_operator_resync_enqueued_total ", "")
}

// queued is how many WebApps wait in the manager's queue (the depth of every priority; -1 when it cannot be read).
func queued(addr string) float64 {
	text, ok := scrape(addr)
	if !ok || !strings.Contains(text, "workqueue_depth{") {
		return -1
	}
	return sumOf(text, "workqueue_depth{", `controller="webapp"`)
}

// metricSum is the sum of the manager's samples whose line starts with prefix and contains sub (0 when the
// manager cannot be scraped).
func metricSum(addr, prefix, sub string) float64 {
	text, _ := scrape(addr)
	return sumOf(text, prefix, sub)
}

// scrape is the manager's metrics in the text format.
func scrape(addr string) (string, bool) {
	resp, err := http.Get("http://" + addr + "/metrics") //nolint:noctx // loopback, short
	if err != nil {
		return "", false
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// sumOf is the sum of the samples of text whose line starts with prefix and contains sub.
func sumOf(text, prefix, sub string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) && strings.Contains(line, sub) {
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				v, _ := strconv.ParseFloat(line[i+1:], 64)
				sum += v
			}
		}
	}
	return sum
}

// printLoad prints the machine's load average: the benchmark shares its cores with whatever else runs.
func printLoad(when string) {
	b, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("load average at %s: %s\n", when, strings.Join(strings.Fields(string(b))[:3], " "))
}

func sortKeys(keys []reqKey) {
	slices.SortFunc(keys, func(a, b reqKey) int {
		if c := strings.Compare(a.resource, b.resource); c != 0 {
			return c
		}
		return strings.Compare(a.verb, b.verb)
	})
}
