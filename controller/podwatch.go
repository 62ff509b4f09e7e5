package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// podWatchLinger is how long the pod watch outlives the last rollout that needed it, so rollouts one after another
// do not list every pod of ours again each time.
const podWatchLinger = time.Minute

var podWatchActive = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "webapp_operator_pod_watch_active",
	Help: "1 while the operator watches the WebApps' pods (some rollout is not complete), 0 otherwise.",
})

func init() { metrics.Registry.MustRegister(podWatchActive) }

// podWatch runs the cache's pod informer only while some WebApp's rollout is not complete. Only then can its pods
// tell more than its Deployment does: a pod in trouble is not ready, so a WebApp that was rolled out comes back
// through its Deployment's status, and that reconcile starts the watch. At rest the operator holds no pod and no
// pod watch. Pod events reconcile the WebApps that need them, through events.
type podWatch struct {
	cache  cache.Cache
	linger time.Duration
	// done ends the sends to events when the manager stops (its controller no longer reads them).
	done <-chan struct{}
	// events carries the WebApps to reconcile for a pod's change (a source.Channel of the controller).
	events chan event.GenericEvent

	mu      sync.RWMutex
	need    map[client.ObjectKey]struct{} // WebApps whose rollout is not complete
	inf     cache.Informer                // nil while the watch is stopped
	indexer toolscache.Indexer            // inf's store, indexed by WebApp (nil when its informer has none)
	stop    *time.Timer                   // pending stop, once need is empty
	started time.Time                     // when inf was started
}

// podWatchSyncWait is how long a WebApp that needs its pods is looked at again every podsRecheck while the watch
// lists them; a list that fails longer (no RBAC for pods, say) leaves it to the other events.
const podWatchSyncWait = 30 * time.Second

func newPodWatch(ctx context.Context, c cache.Cache, linger time.Duration) *podWatch {
	return &podWatch{cache: c, linger: linger, done: ctx.Done(), events: make(chan event.GenericEvent, 1024), need: map[client.ObjectKey]struct{}{}}
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
		if len(w.need) == 0 && w.inf != nil && w.stop == nil {
			var t *time.Timer
			t = time.AfterFunc(w.linger, func() { w.stopIfIdle(t) })
			w.stop = t
		}
		return
	}
	w.need[key] = struct{}{}
	if w.stop != nil {
		w.stop.Stop()
		w.stop = nil
	}
	if w.inf == nil {
		if err := w.start(ctx); err != nil {
			// Without the watch no trouble is claimed; the next reconcile of a WebApp that needs it tries again.
			delete(w.need, key)
			log.FromContext(ctx).Error(err, "starting the pod watch")
		}
	}
}

// start creates the pod informer (the cache's options keep only our pods, slimmed), indexes it by WebApp and
// hands its events to the controller. Called with w.mu held.
func (w *podWatch) start(ctx context.Context) error {
	inf, err := w.cache.GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	if err := inf.AddIndexers(toolscache.Indexers{podsByWebApp: indexPodByWebApp}); err != nil {
		return errors.Join(err, w.cache.RemoveInformer(ctx, &corev1.Pod{}))
	}
	enqueue := func(o any) {
		if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = tomb.Obj
		}
		p, ok := o.(*corev1.Pod)
		if !ok {
			return
		}
		key, ok := webAppOfPod(p)
		if !ok || !w.needs(key) {
			return
		}
		select {
		case w.events <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
		case <-w.done:
			// The manager stops: a blocked send would keep the informer from stopping.
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, o any) { enqueue(o) },
		DeleteFunc: enqueue,
	}); err != nil {
		return errors.Join(err, w.cache.RemoveInformer(ctx, &corev1.Pod{}))
	}
	w.inf, w.started = inf, time.Now()
	if i, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		w.indexer = i.GetIndexer()
	}
	podWatchActive.Set(1)
	log.FromContext(ctx).V(1).Info("pod watch started: a rollout is not complete")
	return nil
}

// stopIfIdle removes the pod informer, and so its pods and its watch, when no WebApp needs it; t is the timer that
// called it, which a later need may have cancelled and replaced.
func (w *podWatch) stopIfIdle(t *time.Timer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != t {
		return
	}
	w.stop = nil
	if len(w.need) > 0 || w.inf == nil {
		return
	}
	if err := w.cache.RemoveInformer(context.Background(), &corev1.Pod{}); err != nil {
		return
	}
	w.inf, w.indexer = nil, nil
	podWatchActive.Set(0)
}

// listing: the pod informer runs and has not listed the pods yet, for less than podWatchSyncWait.
func (w *podWatch) listing() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.inf != nil && !w.inf.HasSynced() && time.Since(w.started) < podWatchSyncWait
}

// active: the pod informer runs.
func (w *podWatch) active() bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.inf != nil
}

func (w *podWatch) needs(key client.ObjectKey) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	_, ok := w.need[key]
	return ok
}

// pods are key's pods as the watch has them, not copied (they must not be changed); ok is false while the watch
// is stopped or has not listed them yet.
func (w *podWatch) pods(ctx context.Context, key client.ObjectKey, selector client.MatchingLabels) (pods []*corev1.Pod, ok bool) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.inf == nil || !w.inf.HasSynced() {
		return nil, false
	}
	if w.indexer != nil {
		items, err := w.indexer.ByIndex(podsByWebApp, key.Namespace+"/"+key.Name)
		if err != nil {
			return nil, false
		}
		pods = make([]*corev1.Pod, 0, len(items))
		for _, it := range items {
			if p, ok := it.(*corev1.Pod); ok {
				pods = append(pods, p)
			}
		}
		return pods, true
	}
	// An informer without one store (a cache of several namespaces): listed through the cache, which the lock
	// keeps from being stopped meanwhile.
	pods, err := listPods(ctx, w.cache, key.Namespace, selector)
	return pods, err == nil
}

// indexPodByWebApp indexes a pod of ours by its WebApp ("namespace/name").
func indexPodByWebApp(o any) ([]string, error) {
	if p, ok := o.(*corev1.Pod); ok && p.Labels[LabelName] == appName {
		if key, ok := webAppOfPod(p); ok {
			return []string{key.Namespace + "/" + key.Name}, nil
		}
	}
	return nil, nil
}
