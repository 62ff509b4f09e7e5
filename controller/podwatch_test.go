package controller

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPodWatchRunsOnlyWhileARolloutNeedsIt: no pod informer until a WebApp needs its pods; its pods' events
// reconcile it and no other WebApp; the informer goes once none needs it for the linger time, and comes back when
// one needs it again.
func TestPodWatchRunsOnlyWhileARolloutNeedsIt(t *testing.T) {
	ctx := context.Background()
	informers := &informertest.FakeInformers{}
	w := newPodWatch(ctx, informers, 20*time.Millisecond)
	running := func() bool { return len(informers.InformersByGVK) > 0 }
	a, b := client.ObjectKey{Namespace: "ns", Name: "a"}, client.ObjectKey{Namespace: "ns", Name: "b"}

	w.set(ctx, a, false)
	if running() || testutil.ToFloat64(podWatchActive) != 0 {
		t.Fatal("a pod informer runs though no WebApp needs one")
	}
	w.set(ctx, a, true)
	if !running() || testutil.ToFloat64(podWatchActive) != 1 {
		t.Fatal("no pod informer while a WebApp needs it")
	}
	inf, err := informers.FakeInformerFor(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	inf.Add(podOf("a"))
	inf.Add(podOf("b")) // b needs nothing: no reconcile
	if got := received(w); len(got) != 1 || got[0] != a {
		t.Fatalf("reconciles for the pods' events: %v, want [%v]", got, a)
	}

	// Needed by two, released by one: it keeps running.
	w.set(ctx, b, true)
	w.set(ctx, a, false)
	time.Sleep(50 * time.Millisecond) // longer than the linger: nothing may stop it
	if !running() {
		t.Fatal("the pod informer stopped while b still needs it")
	}
	w.set(ctx, b, false)
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return !w.active() && !running(), nil
	}); err != nil {
		t.Fatal("the pod informer still runs after the linger with no WebApp needing it")
	}
	if testutil.ToFloat64(podWatchActive) != 0 {
		t.Fatal("webapp_operator_pod_watch_active is not 0")
	}
	w.set(ctx, a, true)
	if !running() || !w.active() {
		t.Fatal("the pod informer did not come back for a WebApp that needs it again")
	}
	w.set(ctx, a, false)
}

func podOf(webApp string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: webApp + "-x",
		Labels: map[string]string{LabelName: appName, LabelInstance: webApp}}}
}

// received drains the watch's events.
func received(w *podWatch) []client.ObjectKey {
	var keys []client.ObjectKey
	for {
		select {
		case e := <-w.events:
			keys = append(keys, client.ObjectKeyFromObject(e.Object))
		default:
			return keys
		}
	}
}
