package controller

import (
	"context"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	webappv1 "github.com/example/webapp-operator/apis/v1"
)

// convergedMemo remembers, per WebApp, the state of everything a reconcile reads (the WebApp, its Deployment,
// Service and PodDisruptionBudget, and the referenced ConfigMaps and Secrets, by UID and resourceVersion in the
// cache) when a reconcile of that state sent nothing and failed nowhere. While all of it stays as it was, a
// resync would decide the same again: it is skipped, with no desired state built, hashed or compared.
type convergedMemo struct {
	mu sync.Mutex
	m  map[types.NamespacedName]string
}

// wroteKey marks a reconcile's context; send sets the flag it carries when it sends anything.
type wroteKey struct{}

func withWriteFlag(ctx context.Context) (context.Context, *bool) {
	wrote := new(bool)
	return context.WithValue(ctx, wroteKey{}, wrote), wrote
}

func markWrite(ctx context.Context) {
	if wrote, ok := ctx.Value(wroteKey{}).(*bool); ok {
		*wrote = true
	}
}

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
	list := &webappv1.WebAppList{}
	// Read-only: the walk looks at names, UIDs and resourceVersions, so the cache's objects are not copied.
	if err := r.Client.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "listing WebApps for the resync")
		return
	}
	for i := range list.Items {
		app := &list.Items[i]
		if r.converged.matches(client.ObjectKeyFromObject(app), r.fingerprint(ctx, app)) {
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

// fingerprint is the state of what reconciling app reads, from the cache; "" when some of it cannot be read.
func (r *WebAppReconciler) fingerprint(ctx context.Context, app *webappv1.WebApp) string {
	var b strings.Builder
	b.WriteString(string(app.UID) + "@" + app.ResourceVersion)
	key := client.ObjectKeyFromObject(app)
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		switch err := r.Client.Get(ctx, key, obj, client.UnsafeDisableDeepCopy); {
		case err == nil:
			b.WriteString(";" + string(obj.GetUID()) + "@" + obj.GetResourceVersion())
		case apierrors.IsNotFound(err):
			b.WriteString(";-")
		default:
			return ""
		}
	}
	if refs := configRefs(app); len(refs) > 0 {
		versions, err := r.configVersions(ctx, app.Namespace, refs)
		if err != nil {
			return ""
		}
		b.WriteString(";" + versions)
	}
	return b.String()
}

func (m *convergedMemo) matches(key types.NamespacedName, fp string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fp != "" && m.m[key] == fp
}

// set remembers fp for key ("" forgets).
func (m *convergedMemo) set(key types.NamespacedName, fp string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fp == "" {
		delete(m.m, key)
		return
	}
	if m.m == nil {
		m.m = map[types.NamespacedName]string{}
	}
	m.m[key] = fp
}
