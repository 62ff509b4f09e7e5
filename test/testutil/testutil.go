// Package testutil holds what the unit, integration and end-to-end tests share: polling with a deadline, reading
// managed fields and metrics, and a live process to point records at.
package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// poll starts at 100 ms, so quick changes are seen quickly, and slows to 500 ms, so a long wait (each check of
// an end-to-end test runs kubectl) costs little CPU.
var poll = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1.5, Steps: 10, Cap: 500 * time.Millisecond}

// checkTimeout bounds one check, so the error reported is the check's own, not the poll's deadline.
const checkTimeout = 10 * time.Second

// Eventually polls check until it returns nil, failing the test with check's last error after timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	if last := pollFor(timeout, check, func(err error) bool { return err == nil }); last != nil {
		t.Fatalf("%s: not true after %v: %v", what, timeout, last)
	}
}

// Consistently polls check for the whole window, failing the test at check's first error: a claim that something
// does not happen (a retry loop, a write) can only be shown over a window.
func Consistently(t testing.TB, window time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	failed := pollFor(window, check, func(err error) bool { return err != nil })
	if failed == nil {
		failed = checkOnce(check) // the window's end
	}
	if failed != nil {
		t.Fatalf("%s: not true throughout %v: %v", what, window, failed)
	}
}

// pollFor runs check until done(its error) or until d has passed, and returns check's last error.
func pollFor(d time.Duration, check func(context.Context) error, done func(error) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var last error
	_ = poll.DelayFunc().Until(ctx, true, true, func(context.Context) (bool, error) {
		last = checkOnce(check)
		return done(last), nil
	})
	return last
}

func checkOnce(check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	return check(ctx)
}

// AppliedBy returns the managedFields entries that manager wrote with Server-Side Apply through subresource
// ("" for the object itself, "status" for its status).
func AppliedBy(entries []metav1.ManagedFieldsEntry, manager, subresource string) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range entries {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == subresource {
			out = append(out, e)
		}
	}
	return out
}

// MetricSum is the sum of the samples of the counter or gauge name that carry all of labels.
func MetricSum(families []*dto.MetricFamily, name string, labels map[string]string) float64 {
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range labels {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// SeedAndCount reads a generative test's seed from the variable seedVar (1 when unset) and its size from countVar
// (def when unset), failing the test on a value that is not a positive number.
func SeedAndCount(t testing.TB, seedVar, countVar string, def int) (uint64, int) {
	t.Helper()
	seed, count := uint64(1), def
	if v := os.Getenv(seedVar); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedVar, v, err)
		}
		seed = n
	}
	if v := os.Getenv(countVar); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", countVar, v)
		}
		count = n
	}
	return seed, count
}

// StartSleep starts `sleep 600`, a live process that is nobody's, killed at the end of the test. It returns once
// the process reads as `sleep 600` in /proc: exec.Cmd.Start returns when the new program has replaced the old one,
// but the kernel lays out its arguments a moment later, and /proc/PID/cmdline reads empty until then (a CI run
// saw "[sleep]").
func StartSleep(t testing.TB) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	Eventually(t, 10*time.Second, "the sleep's command line", func(context.Context) error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		if err == nil && string(b) != "sleep\x00600\x00" {
			err = fmt.Errorf("/proc/%d/cmdline reads %q", cmd.Process.Pid, b)
		}
		return err
	})
	return cmd
}

// WaitEstablished waits up to a minute until each CRD is Established, asking `kubectl wait` through kubectl (which
// returns its output). Until the apiextensions controller sets a new CRD's first condition, its status.conditions
// is null, and kubectl wait (v1.37) fails at once on a null list instead of waiting: it is asked again until the
// deadline.
func WaitEstablished(t testing.TB, kubectl func(args ...string) (string, error), crds ...string) {
	t.Helper()
	Eventually(t, time.Minute, "the CRDs Established", func(context.Context) error {
		out, err := kubectl(append([]string{"wait", "--for=condition=Established", "--timeout=10s"}, crds...)...)
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})
}
