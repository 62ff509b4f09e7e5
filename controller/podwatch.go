package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/pods"
)

// podWatchLinger is how long the pod watch outlives the last rollout that needed it, so rollouts one after another
// do not list every pod of ours again each time.
const podWatchLinger = time.Minute

var podWatchActive = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "webapp_operator_pod_watch_active",
	Help: "1 while the operator watches the WebApps' pods (some rollout is not complete), 0 otherwise.",
})

func init() { metrics.Registry.MustRegister(podWatchActive) }

// podWatch runs the cache's pod informer, and with it an informer of the ReplicaSets' metadata, only while some
// WebApp's rollout is not complete. Only then can its pods tell more than its Deployment does: a pod in trouble is
// not ready, so a WebApp that was rolled out comes back through its Deployment's status, and that reconcile starts
// the watch. At rest the operator holds no pod, no ReplicaSet and no watch of either. A WebApp's pods are those its
// Deployment's ReplicaSets control (the owner chain, by UID): both informers are indexed by their objects'
// controller, and pod events reconcile the WebApps that need them, through events.
type podWatch struct {
	cache  cache.Cache
	linger time.Duration
	// done ends the sends to events when the manager stops (its controller no longer reads them).
	done <-chan struct{}
	// events carries the WebApps to reconcile for a pod's change (a source.Channel of the controller).
	events chan event.GenericEvent

	mu      sync.RWMutex
	need    map[client.ObjectKey]struct{} // WebApps whose rollout is not complete
	pods    *watched                      // the pods; nil while the watch is stopped
	rss     *watched                      // the ReplicaSets' metadata; nil while the watch is stopped
	stop    *time.Timer                   // pending stop, once need is empty
	stopGen uint64                        // which stop is pending (a timer that fires once replaced finds another)
	started time.Time                     // when the informers were started
}

// watched is one informer of the pod watch, with its store when it has one of its own (a cache of all namespaces):
// then its objects are read in place, where a read through the cache would copy each (a pod is 1.2 KB) at every
// resync; a cache of several namespaces keeps a store per namespace, and is read through.
type watched struct {
	inf   cache.Informer
	store toolscache.Indexer // nil: read through the cache
}

// controlled calls each with every object of namespace whose controller is uid, from the store in place, or from
// a list through c (list, an empty list of the kind, holds them): either way they must not be changed.
func (x *watched) controlled(ctx context.Context, c cache.Cache, namespace string, uid types.UID, list client.ObjectList, each func(client.Object)) error {
	if x.store != nil {
		items, err := x.store.ByIndex(byController, string(uid))
		if err != nil {
			return err
		}
		for _, it := range items {
			if o, ok := it.(client.Object); ok && o.GetNamespace() == namespace {
				each(o)
			}
		}
		return nil
	}
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{byController: string(uid)}, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	return meta.EachListItem(list, func(o runtime.Object) error {
		if o, ok := o.(client.Object); ok {
			each(o)
		}
		return nil
	})
}

// get is the object of key, not copied, or nil when there is none. into is an empty object of the kind, for a read
// through c.
func (x *watched) get(ctx context.Context, c cache.Cache, key client.ObjectKey, into client.Object) client.Object {
	if x.store != nil {
		item, _, _ := x.store.GetByKey(key.Namespace + "/" + key.Name)
		o, _ := item.(client.Object)
		return o
	}
	if err := c.Get(ctx, key, into, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	return into
}

// podWatchSyncWait is how long a WebApp that needs its pods is looked at again every pods.Recheck while the watch
// lists them; a list that fails longer (no RBAC for pods, say) leaves it to the other events.
const podWatchSyncWait = 30 * time.Second

// byController is the name of both informers' index of their objects by their controller's UID (a pod's
// ReplicaSet, a ReplicaSet's Deployment).
const byController = "webapp.example.com/controller"

func newPodWatch(ctx context.Context, c cache.Cache, linger time.Duration) *podWatch {
	return &podWatch{cache: c, linger: linger, done: ctx.Done(), events: make(chan event.GenericEvent, 1024), need: map[client.ObjectKey]struct{}{}}
}

// replicaSetMetadata is an empty ReplicaSet as the watch keeps it: its metadata only.
func replicaSetMetadata() *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}}
}

// set records whether key's WebApp needs its pods watched: the first that does starts the watch, and it stops
// linger after the last one stops needing it.
func (w *podWatch) set(ctx context.Context, key client.ObjectKey, needed bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, had := w.need[key]; had == needed {
		return
	}
	if !needed {
		delete(w.need, key)
		if len(w.need) == 0 && w.pods != nil && w.stop == nil {
			w.stopGen++
			gen := w.stopGen
			w.stop = time.AfterFunc(w.linger, func() { w.stopIfIdle(gen) })
		}
		return
	}
	w.need[key] = struct{}{}
	if w.stop != nil {
		w.stop.Stop()
		w.stop = nil
	}
	if w.pods == nil {
		if err := w.start(ctx); err != nil {
			// Without the watch no trouble is claimed; the next reconcile of a WebApp that needs it tries again.
			delete(w.need, key)
			log.FromContext(ctx).Error(err, "starting the pod watch")
		}
	}
}

// start creates the pod and ReplicaSet informers (the cache's options keep only ours, slimmed), indexes both by
// controller and hands their events to the controller. Called with w.mu held; on failure neither is left running.
func (w *podWatch) start(ctx context.Context) error {
	podList, err := w.startInformer(ctx, &corev1.Pod{}, "ReplicaSet", func(o client.Object) []client.ObjectKey { return w.webAppsOfPod(ctx, o) })
	if err != nil {
		return err
	}
	rss, err := w.startInformer(ctx, replicaSetMetadata(), "Deployment", webAppOfReplicaSet)
	if err != nil {
		return errors.Join(err, w.cache.RemoveInformer(ctx, &corev1.Pod{}))
	}
	w.pods, w.rss, w.started = podList, rss, time.Now()
	podWatchActive.Set(1)
	log.FromContext(ctx).V(1).Info("pod watch started: a rollout is not complete")
	return nil
}

// startInformer starts the informer of obj's kind, indexed by its controller of kind controller, whose events
// reconcile the WebApps that webApps names and that need their pods.
func (w *podWatch) startInformer(ctx context.Context, obj client.Object, controller string, webApps func(client.Object) []client.ObjectKey) (*watched, error) {
	inf, err := w.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	x := &watched{inf: inf}
	if s, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		// One store: our own index, read in place.
		x.store = s.GetIndexer()
		err = inf.AddIndexers(toolscache.Indexers{byController: func(o any) ([]string, error) {
			if o, ok := o.(client.Object); ok {
				return indexByController(controller)(o), nil
			}
			return nil, nil
		}})
	} else {
		// A store per namespace: the cache's field index, read through its List.
		err = w.cache.IndexField(ctx, obj, byController, indexByController(controller))
	}
	if err != nil {
		return nil, errors.Join(err, w.cache.RemoveInformer(ctx, obj))
	}
	enqueue := func(objs ...any) {
		var keys []client.ObjectKey
		for _, o := range objs {
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			if o, ok := o.(client.Object); ok {
				keys = append(keys, webApps(o)...)
			}
		}
		for _, key := range slices.Compact(keys) {
			if !w.needs(key) {
				continue
			}
			select {
			case w.events <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
			case <-w.done:
				// The manager stops: a blocked send would keep the informer from stopping.
				return
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { enqueue(o) },
		// The old object too: a pod or ReplicaSet another controller adopted, or that was released, leaves a WebApp.
		// A ReplicaSet's other changes (its counts, on every pod's) are its Deployment's, which brings the WebApp.
		UpdateFunc: func(old, o any) {
			if isPod(o) || ownerChanged(old, o) {
				enqueue(old, o)
			}
		},
		DeleteFunc: func(o any) { enqueue(o) },
	}); err != nil {
		return nil, errors.Join(err, w.cache.RemoveInformer(ctx, obj))
	}
	return x, nil
}

// isPod: o is a pod as the cache keeps it (pods.Slim, pods.SlimTyped).
func isPod(o any) bool {
	switch o.(type) {
	case *pods.Pod, *corev1.Pod:
		return true
	}
	return false
}

// ownerChanged: the two versions of an object have different controllers.
func ownerChanged(old, o any) bool {
	a, okA := old.(client.Object)
	b, okB := o.(client.Object)
	if !okA || !okB {
		return true
	}
	ra, rb := metav1.GetControllerOfNoCopy(a), metav1.GetControllerOfNoCopy(b)
	return (ra == nil) != (rb == nil) || ra != nil && ra.UID != rb.UID
}

// indexByController indexes an object by its controller's UID when that is of kind (in the apps group).
func indexByController(kind string) client.IndexerFunc {
	return func(o client.Object) []string {
		if uid := pods.ControllerUID(o, kind); uid != "" {
			return []string{string(uid)}
		}
		return nil
	}
}

// webAppOfReplicaSet is the WebApp whose Deployment controls the ReplicaSet rs, by name (the Deployment has the
// WebApp's, or is its canary, whose pods carry the WebApp's name in LabelCanaryOf): whose pods a change of rs may
// change. Which pods are the WebApp's is decided by UIDs (pods).
func webAppOfReplicaSet(rs client.Object) []client.ObjectKey {
	ref := metav1.GetControllerOfNoCopy(rs)
	if ref == nil || pods.ControllerUID(rs, "Deployment") == "" {
		return nil
	}
	if of := rs.GetLabels()[webappv2.LabelCanaryOf]; of != "" && ref.Name == of+"-canary" {
		return []client.ObjectKey{{Namespace: rs.GetNamespace(), Name: of}}
	}
	return []client.ObjectKey{{Namespace: rs.GetNamespace(), Name: ref.Name}}
}

// webAppsOfPod is the WebApp whose Deployment's ReplicaSet controls the pod p, through the ReplicaSet as the watch
// has it (its name and UID those of p's controller). A pod whose ReplicaSet the watch does not have yet is nobody's
// for now: the ReplicaSet's own event, once it is listed, brings its WebApp.
func (w *podWatch) webAppsOfPod(ctx context.Context, p client.Object) []client.ObjectKey {
	ref := metav1.GetControllerOfNoCopy(p)
	if ref == nil || pods.ControllerUID(p, "ReplicaSet") == "" {
		return nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	// Read only from a listed informer: the cache would wait for it, or make one the watch has stopped.
	if w.rss == nil || !w.rss.inf.HasSynced() {
		return nil
	}
	rs := w.rss.get(ctx, w.cache, client.ObjectKey{Namespace: p.GetNamespace(), Name: ref.Name}, replicaSetMetadata())
	if rs == nil || rs.GetUID() != ref.UID {
		return nil
	}
	return webAppOfReplicaSet(rs)
}

// stopIfIdle removes the pod and ReplicaSet informers, and so their objects and their watches, when no WebApp needs
// them; gen is the stop that called it, which a later need may have cancelled and another replaced.
func (w *podWatch) stopIfIdle(gen uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop == nil || w.stopGen != gen {
		return
	}
	w.stop = nil
	if len(w.need) > 0 || w.pods == nil {
		return
	}
	ctx := context.Background()
	if err := errors.Join(w.cache.RemoveInformer(ctx, &corev1.Pod{}), w.cache.RemoveInformer(ctx, replicaSetMetadata())); err != nil {
		return
	}
	w.pods, w.rss = nil, nil
	podWatchActive.Set(0)
}

// synced: both informers run and have listed. Called with w.mu held.
func (w *podWatch) synced() bool {
	return w.pods != nil && w.pods.inf.HasSynced() && w.rss.inf.HasSynced()
}

// active: the informers run.
func (w *podWatch) active() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.pods != nil
}

func (w *podWatch) needs(key client.ObjectKey) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	_, ok := w.need[key]
	return ok
}

// podsOf are the pods of namespace that a ReplicaSet controlled by the Deployment dep controls, as the watch has
// them (they must not be changed); none for no Deployment. ok is false while the watch is stopped or has
// not listed them yet; listing says it is listing them (podWatchSyncWait), under the same lock as the read, so a
// watch that syncs after it is never taken for one that had the pods. The lock keeps the informers from being
// stopped meanwhile.
func (w *podWatch) podsOf(ctx context.Context, namespace string, dep types.UID) (podList []*pods.Pod, ok, listing bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if !w.synced() {
		// Listing: the informers run and have not both listed yet, for less than podWatchSyncWait. (Not synced()
		// again: an informer may sync meanwhile, on its own goroutine.)
		return nil, false, w.pods != nil && time.Since(w.started) < podWatchSyncWait
	}
	if dep == "" {
		return nil, true, false
	}
	var replicaSets []types.UID
	if err := w.rss.controlled(ctx, w.cache, namespace, dep, pods.ReplicaSetList(), func(o client.Object) { replicaSets = append(replicaSets, o.GetUID()) }); err != nil {
		return nil, false, false
	}
	for _, rs := range replicaSets {
		if err := w.pods.controlled(ctx, w.cache, namespace, rs, &corev1.PodList{}, func(o client.Object) {
			switch p := o.(type) {
			case *pods.Pod:
				podList = append(podList, p)
			case *corev1.Pod:
				// A cache of some namespaces keeps pods as Pods (pods.SlimTyped).
				podList = append(podList, pods.AsCached(p))
			}
		}); err != nil {
			return nil, false, false
		}
	}
	return podList, true, false
}
