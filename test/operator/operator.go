// Package operator runs the operator's manager inside a test process, as main.go builds it, so a test can count
// and fault its requests, stop and restart it, and read its metrics from this process's registry.
package operator

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller"
	"github.com/example/webapp-operator/test/testutil"
)

// Options are how Run runs the manager.
type Options struct {
	Namespace string        // the one namespace it watches
	Requeue   time.Duration // the resync period
	Workers   int           // MaxConcurrentReconciles (1 when zero)
	// Wrap, when set, wraps the transport of every client of the manager (to count or fault its requests).
	Wrap func(http.RoundTripper) http.RoundTripper
}

// Run starts the manager against cfg until the returned stop is called or the test ends; stop is idempotent and
// waits for the manager to end.
func Run(t testing.TB, cfg *rest.Config, o Options) (stop func()) {
	t.Helper()
	c := rest.CopyConfig(cfg)
	c.WrapTransport = o.Wrap
	mgr, err := ctrl.NewManager(c, ctrl.Options{
		Scheme:                 controller.NewScheme(),
		Cache:                  controller.CacheOptions(namespaces(o.Namespace)...),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Each test, and each restart, builds a new manager; the controller's name is the same in all of them.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.WebAppReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(webappv2.FieldManager),
		RequeueAfter: o.Requeue, MaxConcurrentReconciles: o.Workers, Namespaces: namespaces(o.Namespace)}
	if err := r.SetupWithManager(context.Background(), mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// RoundTripFunc is an http.RoundTripper of a function, for Options.Wrap.
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// WaitResyncs waits until the resync loops of this process have walked the cached WebApps n more times, and once
// more, so that what the n-th walk enqueued has had a period to be reconciled; it fails the test after timeout.
// (The queue's own gauges cannot say it: a stopped operator leaves its last depth in them.)
func WaitResyncs(t testing.TB, n int, timeout time.Duration) {
	t.Helper()
	before, start := MetricSum(t, "webapp_operator_resyncs_total", nil), time.Now()
	testutil.Eventually(t, timeout, fmt.Sprintf("%d resyncs", n), func(context.Context) error {
		if walks := MetricSum(t, "webapp_operator_resyncs_total", nil) - before; walks < float64(n+1) {
			return fmt.Errorf("%v walks in %v", walks, time.Since(start).Round(time.Second))
		}
		return nil
	})
}

// MetricSum is the sum of the samples of metric name with labels in the metrics registry of this process.
func MetricSum(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return testutil.MetricSum(families, name, labels)
}

// namespaces is the one namespace watched, or none (all).
func namespaces(ns string) []string {
	if ns == "" {
		return nil
	}
	return []string{ns}
}
