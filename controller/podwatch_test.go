package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/controller/status"
)

// fakeCache is controller-runtime's fake informers, reading from reader (theirs find nothing). An informer it
// makes keeps a store (storeInformer), synced or not; with throughCache its informers have no store of their own,
// as in a cache of several namespaces.
type fakeCache struct {
	*informertest.FakeInformers
	reader       client.Reader
	synced       bool
	throughCache bool
}

// informer is the informer of obj's kind, made if there is none.
func (c *fakeCache) informer(obj client.Object) (toolscache.SharedIndexInformer, error) {
	gvk, err := apiutil.GVKForObject(obj, NewScheme())
	if err != nil {
		return nil, err
	}
	if c.InformersByGVK == nil {
		c.InformersByGVK = map[schema.GroupVersionKind]toolscache.SharedIndexInformer{}
	}
	if _, ok := c.InformersByGVK[gvk]; !ok {
		c.InformersByGVK[gvk] = newStoreInformer(c.synced)
	}
	return c.InformersByGVK[gvk], nil
}

// stores are the pod and ReplicaSet informers, made if need be.
func (c *fakeCache) stores() (podList, rss *storeInformer) {
	p, _ := c.informer(&corev1.Pod{})
	r, _ := c.informer(replicaSetMetadata())
	return p.(*storeInformer), r.(*storeInformer)
}

func (c *fakeCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.informer(obj)
	if c.throughCache && err == nil {
		// Only the methods of an Informer: no GetIndexer.
		return struct{ cache.Informer }{inf}, nil
	}
	return inf, err
}

func (c *fakeCache) RemoveInformer(_ context.Context, obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, NewScheme())
	delete(c.InformersByGVK, gvk)
	return err
}

func (c *fakeCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}

func (c *fakeCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reader.List(ctx, list, opts...)
}

// storeInformer is a fake informer with a store: an object added, updated or deleted is in it (or gone) before the
// handlers hear of it, as with an informer.
type storeInformer struct {
	*controllertest.FakeInformer
	store toolscache.Indexer
}

func newStoreInformer(synced bool) *storeInformer {
	var opts []controllertest.InformerOption
	if synced {
		opts = append(opts, controllertest.Synced)
	}
	return &storeInformer{FakeInformer: controllertest.NewFakeInformer(opts...), store: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})}
}

func (i *storeInformer) GetIndexer() toolscache.Indexer { return i.store }
func (i *storeInformer) AddIndexers(indexers toolscache.Indexers) error {
	return i.store.AddIndexers(indexers)
}

func (i *storeInformer) Add(o metav1.Object) {
	_ = i.store.Add(o)
	i.FakeInformer.Add(o)
}

func (i *storeInformer) Update(old, o metav1.Object) {
	_ = i.store.Update(o)
	i.FakeInformer.Update(old, o)
}

func (i *storeInformer) Delete(o metav1.Object) {
	_ = i.store.Delete(o)
	i.FakeInformer.Delete(o)
}

// TestPodWatchRunsOnlyWhileARolloutNeedsIt: no pod or ReplicaSet informer until a WebApp needs its pods; its pods'
// events reconcile it and no other WebApp; the informers go once none needs them for the linger time, and come back
// when one needs them again.
func TestPodWatchRunsOnlyWhileARolloutNeedsIt(t *testing.T) {
	ctx := context.Background()
	informers := &fakeCache{FakeInformers: &informertest.FakeInformers{}, synced: true}
	w := newPodWatch(ctx, informers, 20*time.Millisecond)
	running := func() int { return len(informers.InformersByGVK) }
	a, b := client.ObjectKey{Namespace: "ns", Name: "a"}, client.ObjectKey{Namespace: "ns", Name: "b"}

	w.set(ctx, a, false)
	if running() != 0 || testutil.ToFloat64(podWatchActive) != 0 {
		t.Fatal("an informer runs though no WebApp needs one")
	}
	w.set(ctx, a, true)
	if running() != 2 || testutil.ToFloat64(podWatchActive) != 1 {
		t.Fatalf("%d informers while a WebApp needs its pods, want 2 (pods, ReplicaSets)", running())
	}
	podList, rss := informers.stores()
	rss.Add(rsOf("a-1", "a", "uid-dep-a"))
	rss.Add(rsOf("b-1", "b", "uid-dep-b")) // b needs nothing: no reconcile
	podList.Add(podOf("a", "a-1", "uid-a-1"))
	podList.Add(podOf("b", "b-1", "uid-b-1"))
	if got := received(w); len(got) != 2 || got[0] != a || got[1] != a {
		t.Fatalf("reconciles for the ReplicaSets' and pods' events: %v, want [%v %v]", got, a, a)
	}

	// Needed by two, released by one: they keep running.
	w.set(ctx, b, true)
	w.set(ctx, a, false)
	time.Sleep(50 * time.Millisecond) // longer than the linger: nothing may stop it
	if running() != 2 {
		t.Fatal("the informers stopped while b still needs them")
	}
	w.set(ctx, b, false)
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return !w.active() && running() == 0, nil
	}); err != nil {
		t.Fatal("the informers still run after the linger with no WebApp needing them")
	}
	if testutil.ToFloat64(podWatchActive) != 0 {
		t.Fatal("webapp_operator_pod_watch_active is not 0")
	}
	w.set(ctx, a, true)
	if running() != 2 || !w.active() {
		t.Fatal("the informers did not come back for a WebApp that needs them again")
	}
	w.set(ctx, a, false)
}

// TestPodEventsReconcileTheWebAppWhoseDeploymentMadeThePod: a pod's event reconciles the WebApp whose Deployment's
// ReplicaSet controls it (by UID), none for a pod that only carries its labels; a ReplicaSet's arrival or change
// of controller reconciles its Deployment's WebApp (its pods' events may have come before it), its other changes
// do not.
func TestPodEventsReconcileTheWebAppWhoseDeploymentMadeThePod(t *testing.T) {
	ctx := context.Background()
	for _, throughCache := range []bool{false, true} {
		t.Run(map[bool]string{false: "one store", true: "through the cache"}[throughCache], func(t *testing.T) {
			rs := rsOf("a-1", "a", "uid-dep-a")
			// Through the cache, reads find what the API has; here the ReplicaSet before its event says so.
			reader := newFakeEnv(t, &appsv1.ReplicaSet{ObjectMeta: rs.ObjectMeta})
			informers := &fakeCache{FakeInformers: &informertest.FakeInformers{}, reader: reader, synced: true, throughCache: throughCache}
			w := newPodWatch(ctx, informers, time.Millisecond)
			a := client.ObjectKey{Namespace: "ns", Name: "a"}
			w.set(ctx, a, true)
			podList, rss := informers.stores()
			defer stopWatch(t, w, a)
			adopted := rsOf("a-1", "a", "uid-dep-other")
			counted := rsOf("a-1", "a", "uid-dep-a")
			counted.ResourceVersion = "2"
			cases := []struct {
				name  string
				event func()
				want  []client.ObjectKey
			}{
				// Its pods may come before it: its arrival brings the WebApp, whose reconcile reads them.
				{"the ReplicaSet arrives", func() { rss.Add(rs) }, []client.ObjectKey{a}},
				{"a pod of the Deployment's ReplicaSet", func() { podList.Add(podOf("a", "a-1", "uid-a-1")) }, []client.ObjectKey{a}},
				{"its update", func() { podList.Update(podOf("a", "a-1", "uid-a-1"), podOf("a", "a-1", "uid-a-1")) }, []client.ObjectKey{a}},
				{"its deletion", func() { podList.Delete(podOf("a", "a-1", "uid-a-1")) }, []client.ObjectKey{a}},
				{"a bare pod with the WebApp's labels", func() { podList.Add(podOf("a", "", "")) }, nil},
				{"a pod that names the ReplicaSet with another UID", func() { podList.Add(podOf("a", "a-1", "uid-forged")) }, nil},
				{"a pod of a ReplicaSet the watch does not have", func() { podList.Add(podOf("a", "a-2", "uid-a-2")) }, nil},
				// Its counts change on every pod's change: its Deployment's event brings the WebApp.
				{"the ReplicaSet's counts change", func() { rss.Update(rs, counted) }, nil},
				{"another Deployment of the name adopts it", func() { rss.Update(counted, adopted) }, []client.ObjectKey{a}},
				{"it is deleted", func() { rss.Delete(adopted) }, []client.ObjectKey{a}},
			}
			for _, tc := range cases {
				tc.event()
				if got := received(w); !slices.Equal(got, tc.want) {
					t.Errorf("%s: reconciles %v, want %v", tc.name, got, tc.want)
				}
			}
		})
	}
}

// rsOf is the metadata of ReplicaSet name of namespace ns (UID "uid-"+name) as the watch keeps it, controlled by the
// Deployment dep of uid.
func rsOf(name, dep string, uid types.UID) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: replicaSetMetadata().TypeMeta, ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		UID: types.UID("uid-" + name), OwnerReferences: []metav1.OwnerReference{apptest.ControllerRef("Deployment", dep, uid)}}}
}

// podOf is a pod with WebApp webApp's labels, controlled by the ReplicaSet rs of uid (none when rs is "").
func podOf(webApp, rs string, uid types.UID) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: webApp + "-x",
		Labels: map[string]string{webappv2.LabelName: webappv2.AppName, webappv2.LabelInstance: webApp, webappv2.LabelManagedBy: webappv2.ManagedBy}}}
	if rs != "" {
		p.OwnerReferences = []metav1.OwnerReference{apptest.ControllerRef("ReplicaSet", rs, uid)}
	}
	return p
}

// stopWatch says key no longer needs its pods and waits until w stops, so the next test finds no watch running.
func stopWatch(t *testing.T, w *podWatch, key client.ObjectKey) {
	t.Helper()
	w.set(context.Background(), key, false)
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return !w.active(), nil
	}); err != nil {
		t.Fatalf("the pod watch still runs %v after the last WebApp released it (linger %v)", 5*time.Second, w.linger)
	}
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

// The watch reads a WebApp's pods by the owner chain, in place from its informers' stores or through the cache (a
// cache of several namespaces): the same pods either way.
func TestPodWatchReadsThePodsItsDeploymentMade(t *testing.T) {
	ctx := context.Background()
	app := apptest.NewApp("web", 1, 80, "nginx:1.25")
	elsewhere := apptest.NewApp("web", 1, 80, "nginx:1.25")
	elsewhere.Namespace = "other"
	replicaSets := []*appsv1.ReplicaSet{
		replicaSetOf(app, "web-1", apptest.ControllerRef("Deployment", "web", "uid-dep")),
		replicaSetOf(app, "web-0", apptest.ControllerRef("Deployment", "web", "uid-dep")),
		replicaSetOf(app, "web-p", apptest.ControllerRef("Deployment", "web", "uid-dep-before")),
		// Another namespace's ReplicaSet claiming the Deployment: owner references do not cross namespaces.
		replicaSetOf(elsewhere, "web-x", apptest.ControllerRef("Deployment", "web", "uid-dep")),
	}
	podList := []*corev1.Pod{
		labelledPod(app, "a", "x", apptest.ControllerRef("ReplicaSet", "web-1", "uid-web-1")),
		labelledPod(app, "b", "x", apptest.ControllerRef("ReplicaSet", "web-0", "uid-web-0")),
		labelledPod(app, "bare", "x"),
		labelledPod(app, "forged", "x", apptest.ControllerRef("ReplicaSet", "web-1", "uid-forged")),
		labelledPod(app, "previous", "x", apptest.ControllerRef("ReplicaSet", "web-p", "uid-web-p")),
		labelledPod(elsewhere, "x", "x", apptest.ControllerRef("ReplicaSet", "web-x", "uid-web-x")),
	}
	for _, throughCache := range []bool{false, true} {
		t.Run(map[bool]string{false: "one store", true: "through the cache"}[throughCache], func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(NewScheme()).
				WithIndex(&corev1.Pod{}, byController, indexByController("ReplicaSet")).
				WithIndex(&appsv1.ReplicaSet{}, byController, indexByController("Deployment"))
			for _, rs := range replicaSets {
				b = b.WithObjects(rs.DeepCopy())
			}
			for _, p := range podList {
				b = b.WithObjects(p.DeepCopy())
			}
			informers := &fakeCache{FakeInformers: &informertest.FakeInformers{}, reader: b.Build(), synced: true, throughCache: throughCache}
			w := newPodWatch(ctx, informers, time.Millisecond)
			key := client.ObjectKeyFromObject(app)
			w.set(ctx, key, true)
			defer stopWatch(t, w, key)
			podStore, rsStore := informers.stores()
			for _, rs := range replicaSets {
				rsStore.Add(&metav1.PartialObjectMetadata{TypeMeta: replicaSetMetadata().TypeMeta, ObjectMeta: rs.ObjectMeta})
			}
			for _, p := range podList {
				podStore.Add(p)
			}
			for _, tc := range []struct {
				dep  types.UID
				want []string
			}{{"uid-dep", []string{"a", "b"}}, {"uid-dep-before", []string{"previous"}}, {"", nil}, {"uid-unknown", nil}} {
				got, ok, listing := w.podsOf(ctx, "ns", tc.dep)
				var names []string
				for _, p := range got {
					names = append(names, p.Name)
				}
				slices.Sort(names)
				if !ok || listing || !slices.Equal(names, tc.want) {
					t.Errorf("pods of Deployment %q: %v (known %v, listing %v), want %v", tc.dep, names, ok, listing, tc.want)
				}
			}
		})
	}
}

// A read of the pods made while the watch lists them says so, and the reconcile that made it holds its status back
// even when the watch has synced by the time it decides: it used to ask the watch again then, find it synced, and
// write a status without the pods' words (then with them again), after every restart that met the race.
func TestPodsReadWhileTheWatchListsHoldTheStatusBack(t *testing.T) {
	ctx := context.Background()
	app := apptest.NewApp("web", 1, 80, "nginx:1.25")
	informers := &fakeCache{FakeInformers: &informertest.FakeInformers{}, reader: fake.NewClientBuilder().WithScheme(NewScheme()).Build()}
	w := newPodWatch(ctx, informers, time.Millisecond)
	key := client.ObjectKeyFromObject(app)
	w.set(ctx, key, true)
	defer stopWatch(t, w, key)

	r := &WebAppReconciler{podWatch: w}
	dep := apptest.Deployment(1, 1, 1, 1, 1, 0, 0)
	read := r.readPods(ctx, app, dep)
	if read.known || !read.listing {
		t.Fatalf("pods read before the watch listed them: known %v, listing %v; want unknown, listing", read.known, read.listing)
	}
	// The watch lists them between the read and the decision.
	podStore, rsStore := informers.stores()
	podStore.Synced()
	rsStore.Synced()
	obs := status.Observation{Dep: dep}
	r.podsAfterWrites(ctx, app, observed{pods: read}, &obs)
	if !obs.PodsPending {
		t.Error("a reconcile whose pods were read while the watch listed them would write its status without them")
	}
	// The next reconcile reads them.
	if again := r.readPods(ctx, app, dep); !again.known || again.listing {
		t.Errorf("pods read after the watch listed them: known %v, listing %v; want known", again.known, again.listing)
	}
}
