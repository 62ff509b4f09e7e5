package controller

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// PriorityUnobserved is the queue priority of a WebApp whose status does not describe its spec yet (a new WebApp, a
// changed spec): above every priority controller-runtime gives (0 for a change, -100 for the initial list).
const PriorityUnobserved = 100

// unobservedFirst is the controller's queue: controller-runtime's priority queue, in which a WebApp whose status
// does not observe its generation goes before the others. A cold start would otherwise do the reverse: the initial
// list's WebApps go in at low priority, and the events of the children their first reconciles create (a
// Deployment's status as it rolls out) at normal priority, so each first reconcile brought a second (a status
// write) ahead of the next WebApp's first. Those waiting on an apply (kubectl, a pipeline) are served first; the
// rest follows, in the order controller-runtime gives it.
type unobservedFirst struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	// unobserved says whether the WebApp of a request has a status that does not observe its generation.
	unobserved func(types.NamespacedName) bool
}

// newQueue returns controller-runtime's priority queue (as the controller would make it) wrapped by
// unobservedFirst.
func newQueue(log logr.Logger, unobserved func(types.NamespacedName) bool) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		q := priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
			o.Log = log.WithValues("controller", name)
			o.RateLimiter = rl
		})
		return unobservedFirst{PriorityQueue: q, unobserved: unobserved}
	}
}

// AddWithOpts adds the items, those whose WebApp is unobserved at PriorityUnobserved.
func (q unobservedFirst) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	var rest []reconcile.Request
	for _, item := range items {
		if !q.unobserved(item.NamespacedName) {
			if o.Priority != nil && *o.Priority == PriorityUnobserved {
				// The controller adds an item back (a requeue, an error) at the priority it was taken at: a
				// WebApp raised while unobserved is not kept above the rest once its status observes its spec.
				o.Priority = nil
				q.PriorityQueue.AddWithOpts(o, item)
				continue
			}
			rest = append(rest, item)
			continue
		}
		first := o
		first.Priority = new(int)
		*first.Priority = max(PriorityUnobserved, derefInt(o.Priority))
		q.PriorityQueue.AddWithOpts(first, item)
	}
	if len(rest) > 0 {
		q.PriorityQueue.AddWithOpts(o, rest...)
	}
}

// Add, AddAfter and AddRateLimited are AddWithOpts's, as in controller-runtime's queue.
func (q unobservedFirst) Add(item reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, item) }

func (q unobservedFirst) AddAfter(item reconcile.Request, d time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: d}, item)
}

func (q unobservedFirst) AddRateLimited(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, item)
}

func derefInt(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

// unobserved returns whether the WebApp of key, as the cache has it (not copied), has a status that does not observe
// its generation (false when it is not there or is being deleted: a deletion needs no hurry).
func (r *WebAppReconciler) unobserved(key types.NamespacedName) bool {
	var app *webappv2.WebApp
	if s := r.stores["WebApp"]; s != nil {
		item, _, _ := s.GetByKey(key.Namespace + "/" + key.Name)
		app, _ = item.(*webappv2.WebApp)
	} else {
		// A cache restricted to namespaces keeps no single store: its reader, without a copy, waiting little for
		// an informer not synced yet (event handlers call this).
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		app = &webappv2.WebApp{}
		if r.Client.Get(ctx, key, app, client.UnsafeDisableDeepCopy) != nil {
			app = nil
		}
	}
	return app != nil && app.DeletionTimestamp == nil && app.Status.ObservedGeneration != app.Generation
}
