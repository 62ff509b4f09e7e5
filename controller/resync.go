package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/pods"
)

// resyncLoop is the periodic resync. Every period it walks the cached WebApps and enqueues those a reconcile could
// decide differently for: those whose inputs changed since their last reconcile that sent nothing and failed
// nowhere, and those without one (written to, waiting, refused, failing, being deleted). A converged WebApp costs
// a few cache lookups per period instead of a reconcile. Like the controller, it runs only while leading.
func (r *WebAppReconciler) resyncLoop(enqueue chan<- event.GenericEvent) manager.RunnableFunc {
	return func(ctx context.Context) error {
		tick := time.NewTicker(r.requeueAfter())
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				r.resyncOnce(ctx, enqueue)
			}
		}
	}
}

// resyncOnce enqueues every cached WebApp whose fingerprint is not the one its last converged reconcile saw.
func (r *WebAppReconciler) resyncOnce(ctx context.Context, enqueue chan<- event.GenericEvent) {
	apps, err := r.cachedWebApps(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing WebApps for the resync")
		return
	}
	for _, app := range apps {
		// A WebApp no reconcile has settled (new, written to, waiting) is enqueued without its fingerprint: during a
		// cold start of thousands, most are, every period. Enqueued, it is raised from the initial list's priority.
		key := client.ObjectKeyFromObject(app)
		if r.mem.settled(key) && r.mem.leftAlone(key, r.fingerprint(ctx, app)) {
			continue
		}
		select {
		case enqueue <- event.GenericEvent{Object: app}:
			resyncEnqueuedTotal.Inc()
		case <-ctx.Done():
			return
		}
	}
	resyncsTotal.Inc()
}

// fingerprint is the state of what reconciling app reads, from the cache; "" when some of it cannot be read. An
// object our own last write left at a newer resourceVersion than the cache shows counts at that version, so a
// reconcile settled after its writes (a failing one) sees the same fingerprint once the cache catches up.
func (r *WebAppReconciler) fingerprint(ctx context.Context, app *webappv2.WebApp) string {
	var b strings.Builder
	key := client.ObjectKeyFromObject(app)
	// Our own writes are not a change: a cache behind them shows the version they returned.
	b.WriteString(string(app.UID) + "@" + r.mem.newest(key, app.UID, app.ResourceVersion, "WebApp", "WebAppStatus"))
	for _, c := range r.activeChildren() {
		switch uid, rv, found, err := r.peek(ctx, c.kind, types.NamespacedName{Namespace: key.Namespace, Name: c.objectName(app)}); {
		case err != nil:
			return ""
		case found:
			b.WriteString(";" + string(uid) + "@" + r.mem.newest(key, uid, rv, c.id))
		default:
			b.WriteString(";-")
		}
	}
	if refs := configRefs(app); len(refs) > 0 {
		versions, err := r.configVersions(ctx, app.Namespace, refs)
		if err != nil {
			return ""
		}
		b.WriteString(";" + versions)
	}
	// What the pods say is wrong is part of what the status reports: a pod that starts crashing under a settled
	// WebApp must bring it back.
	// (Not the failed probes' words: only a reconcile reads them, and a pod that stops being ready changes its
	// Deployment's status.)
	var podList []*pods.Pod
	// At rest (no pod watch) there are no pods to read: no Deployment is looked up for them either.
	if r.podWatch == nil || r.podWatch.active() {
		podList, _ = r.podsOf(ctx, app, r.cachedDeployment(ctx, key))
		if app.Spec.Rollout.Canary != nil {
			// A canary's pods that start crashing roll it back.
			canary, _ := r.podsOf(ctx, app, r.cachedDeployment(ctx, types.NamespacedName{Namespace: key.Namespace, Name: desired.CanaryName(app)}))
			podList = append(slices.Clip(podList), canary...)
		}
	}
	reason, msg := pods.Trouble(podList, nil)
	b.WriteString(";" + reason + ":" + msg)
	// A pod that starts running unready changes no other input: its probes' words are to be read then. (The
	// index lists pods in no order.)
	var unready []string
	for _, p := range podList {
		if pods.AwaitsReadiness(p) {
			unready = append(unready, string(p.UID))
		}
	}
	slices.Sort(unready)
	for _, uid := range unready {
		b.WriteString(";unready:" + uid)
	}
	return b.String()
}

// cacheStores are the informers' stores of the kinds a fingerprint reads, keyed by kind. The resync and the
// fingerprint read them in place, where a client's Get would copy each object into a new one: at rest that copy
// was most of the resync's garbage, and so of the collector's work. A kind without a store (a cache restricted to
// namespaces keeps one per namespace; a client without a cache in unit tests) is read through the client.
type cacheStores map[string]toolscache.Store

// storesOf returns the stores of c's informers for the kinds a fingerprint reads.
func storesOf(ctx context.Context, c cache.Cache) (cacheStores, error) {
	stores := cacheStores{}
	for _, kind := range fingerprintKinds() {
		inf, err := c.GetInformer(ctx, cachedObject(kind), cache.BlockUntilSynced(false))
		if err != nil {
			return nil, err
		}
		if s, ok := inf.(interface{ GetStore() toolscache.Store }); ok {
			stores[kind] = s.GetStore()
		}
	}
	return stores, nil
}

// fingerprintKinds are the kinds a fingerprint reads in a store: the WebApp, its children, and the ConfigMaps and
// Secrets it refers to. A kind whose API may be missing has no store taken at the start: it is read through the
// client (whose cache makes its informer when it is first read).
func fingerprintKinds() []string {
	kinds := []string{"WebApp"}
	for _, c := range children {
		if !c.ifServed && !c.isVariant() {
			kinds = append(kinds, c.kind)
		}
	}
	return append(kinds, "ConfigMap", "Secret")
}

// cachedObject is an empty object of kind as the cache keeps it (ConfigMaps and Secrets: their metadata only).
func cachedObject(kind string) client.Object {
	if c := childKindOf(kind); c != nil {
		return c.object()
	}
	if kind == "WebApp" {
		return &webappv2.WebApp{}
	}
	return metadataOnly(kind)
}

// peek returns the UID and resourceVersion of the cached object of kind and key; found is false when there is none
// (no error: the fingerprint and the config hash look up absent children and references of every WebApp each resync,
// and a NotFound error per lookup was 7% of the manager's CPU at rest at 10,000 WebApps).
func (r *WebAppReconciler) peek(ctx context.Context, kind string, key types.NamespacedName) (uid types.UID, rv string, found bool, err error) {
	if s := r.stores[kind]; s != nil {
		item, ok, err := s.GetByKey(key.Namespace + "/" + key.Name)
		switch obj, isObj := item.(metav1.Object); {
		case err != nil:
			return "", "", false, err
		case !ok:
			return "", "", false, nil
		case !isObj:
			return "", "", false, fmt.Errorf("the cache holds a %T for %s %s", item, kind, key)
		default:
			return obj.GetUID(), obj.GetResourceVersion(), true, nil
		}
	}
	obj := cachedObject(kind)
	if err := r.Client.Get(ctx, key, obj, client.UnsafeDisableDeepCopy); err != nil {
		if apierrors.IsNotFound(err) {
			return "", "", false, nil
		}
		return "", "", false, err
	}
	return obj.GetUID(), obj.GetResourceVersion(), true, nil
}

// cachedDeployment is the Deployment of key as the cache has it, not copied (it must not be changed); nil when there
// is none or it cannot be read.
func (r *WebAppReconciler) cachedDeployment(ctx context.Context, key types.NamespacedName) *appsv1.Deployment {
	if s := r.stores["Deployment"]; s != nil {
		item, _, _ := s.GetByKey(key.Namespace + "/" + key.Name)
		dep, _ := item.(*appsv1.Deployment)
		return dep
	}
	dep := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, key, dep, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	return dep
}

// cachedWebApps are the WebApps in the cache, not copied: they must not be changed.
func (r *WebAppReconciler) cachedWebApps(ctx context.Context) ([]*webappv2.WebApp, error) {
	return webAppsIn(ctx, r.stores["WebApp"], r.Client)
}

// webAppsIn are the WebApps of an informer's store, read in place, or listed through reader without copies when
// there is no store (a cache restricted to namespaces keeps one per namespace): either way they must not be
// changed.
func webAppsIn(ctx context.Context, store toolscache.Store, reader client.Reader) ([]*webappv2.WebApp, error) {
	if store != nil {
		items := store.List()
		apps := make([]*webappv2.WebApp, 0, len(items))
		for _, item := range items {
			if app, ok := item.(*webappv2.WebApp); ok {
				apps = append(apps, app)
			}
		}
		return apps, nil
	}
	list := &webappv2.WebAppList{}
	if err := reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	apps := make([]*webappv2.WebApp, len(list.Items))
	for i := range list.Items {
		apps[i] = &list.Items[i]
	}
	return apps, nil
}

// failingWebAppsIn maps a ResourceQuota, or a Namespace, to the WebApps of its namespace that are failing (a
// transient error, such as a quota's or a webhook's 403): a quota raised or removed, or a namespace relabelled (a
// webhook may select namespaces by label), may be what fixes the write, and that WebApp is retried at once rather
// than at the end of its backoff. (A refusal as invalid, 422, waits for a change of the WebApp or the child, or 5
// minutes.)
func (r *WebAppReconciler) failingWebAppsIn(_ context.Context, o client.Object) []reconcile.Request {
	ns := o.GetNamespace()
	if ns == "" {
		// A Namespace is its own namespace.
		ns = o.GetName()
	}
	keys := r.mem.failingIn(ns)
	reqs := make([]reconcile.Request, len(keys))
	for i, key := range keys {
		reqs[i] = reconcile.Request{NamespacedName: key}
	}
	return reqs
}
