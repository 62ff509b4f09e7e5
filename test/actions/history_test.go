package actions

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/example/webapp-operator/test/testutil"
)

// kind is a kind of object the test watches: the WebApp and its three children.
type kind struct {
	name    string // Deployment
	short   string // deployment, as kubectl names it
	gvr     schema.GroupVersionResource
	version string // apiVersion
}

var (
	webAppKind     = kind{"WebApp", "webapp", schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "webapps"}, "example.com/v1"}
	deploymentKind = kind{"Deployment", "deployment", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "apps/v1"}
	serviceKind    = kind{"Service", "service", schema.GroupVersionResource{Version: "v1", Resource: "services"}, "v1"}
	pdbKind        = kind{"PodDisruptionBudget", "poddisruptionbudget", schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}, "policy/v1"}
	childKinds     = []kind{deploymentKind, serviceKind, pdbKind}
)

// version is one state of an object as a watch delivered it.
type version struct {
	at      time.Time // when the watch delivered it
	rv      int64
	deleted bool
	obj     *unstructured.Unstructured
}

// history records every version of the WebApps and children of one namespace, in the order of the API server's
// resourceVersions (one etcd, so they are ordered across kinds), so an invariant can be checked at every state
// ever stored, not only at the moments the test looks.
type history struct {
	mu      sync.Mutex
	byKind  map[string][]version
	lastRV  map[string]int64
	err     error
	stop    context.CancelFunc
	markers int
}

// watchHistory starts recording the WebApps and children of namespace ns, still empty, until the test ends.
func watchHistory(t *testing.T, ns string) *history {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &history{byKind: map[string][]version{}, lastRV: map[string]int64{}, stop: cancel}
	t.Cleanup(cancel)
	for _, k := range append([]kind{webAppKind}, childKinds...) {
		lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return dyn.Resource(k.gvr).Namespace(ns).Watch(ctx, o)
		}}
		// From the resourceVersion of an empty list: a watch cache may not reach back to the namespace's creation.
		list, err := dyn.Resource(k.gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			t.Fatalf("namespace %s is not empty: %d %s", ns, len(list.Items), k.name)
		}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), lw)
		if err != nil {
			t.Fatal(err)
		}
		go h.record(ctx, k.name, w)
	}
	return h
}

func (h *history) record(ctx context.Context, kind string, w *watchtools.RetryWatcher) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			h.mu.Lock()
			u, isObj := ev.Object.(*unstructured.Unstructured)
			switch {
			case ev.Type == watch.Error || !isObj:
				if h.err == nil {
					h.err = fmt.Errorf("watch of %s: %v", kind, ev.Object)
				}
			default:
				rv, _ := strconv.ParseInt(u.GetResourceVersion(), 10, 64)
				h.byKind[kind] = append(h.byKind[kind], version{at: time.Now(), rv: rv, deleted: ev.Type == watch.Deleted, obj: u})
				h.lastRV[kind] = max(h.lastRV[kind], rv)
			}
			h.mu.Unlock()
		}
	}
}

// versions returns the versions of the object kind/name recorded so far.
func (h *history) versions(kind, name string) []version {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []version
	for _, v := range h.byKind[kind] {
		if v.obj.GetName() == name {
			out = append(out, v)
		}
	}
	return out
}

// all returns every version of kind recorded so far.
func (h *history) all(kind string) []version {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]version(nil), h.byKind[kind]...)
}

// seen returns the last resourceVersion recorded of kind (every change of kind up to it has been recorded).
func (h *history) seen(kind string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastRV[kind]
}

// markerName is the name of the object of each child kind the test touches to know its watch is up to date; no
// WebApp has that name.
const markerName = "zz-marker"

// createMarkers creates one object of each child kind that nothing else uses: touching it and waiting for the
// touch in the watch proves every earlier change of that kind has been recorded.
func (h *history) createMarkers(t *testing.T, ns string) {
	t.Helper()
	sel := map[string]any{"matchLabels": map[string]any{"marker": "yes"}}
	objs := []map[string]any{
		{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": markerName}, "spec": map[string]any{
			"replicas": int64(0), "selector": sel, "template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"marker": "yes"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "marker:1"}}}}}},
		{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": markerName}, "spec": map[string]any{
			"clusterIP": "None", "selector": map[string]any{"marker": "yes"}}},
		{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": map[string]any{"name": markerName}, "spec": map[string]any{
			"maxUnavailable": int64(1), "selector": sel}},
	}
	for i, o := range objs {
		if _, err := dyn.Resource(childKinds[i].gvr).Namespace(ns).Create(context.Background(), &unstructured.Unstructured{Object: o}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating the %s marker: %v", childKinds[i].name, err)
		}
	}
}

// sync waits until the watch of every child kind has recorded everything stored before the call.
func (h *history) sync(t testing.TB, ns string) {
	t.Helper()
	h.markers++
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"marker":"%d"}}}`, h.markers)
	want := map[string]int64{}
	for _, k := range childKinds {
		u, err := dyn.Resource(k.gvr).Namespace(ns).Patch(context.Background(), markerName, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("touching the %s marker: %v", k.name, err)
		}
		want[k.name], _ = strconv.ParseInt(u.GetResourceVersion(), 10, 64)
	}
	testutil.Eventually(t, 30*time.Second, "the watches caught up", func(context.Context) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.err != nil {
			return h.err
		}
		for k, rv := range want {
			if h.lastRV[k] < rv {
				return fmt.Errorf("%s watch at %d, want %d", k, h.lastRV[k], rv)
			}
		}
		return nil
	})
}
