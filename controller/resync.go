package controller

import (
	"context"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// fingerprint is the state of what reconciling app reads, from the cache; "" when some of it cannot be read.
func (r *WebAppReconciler) fingerprint(ctx context.Context, app *webappv1.WebApp) string {
	var b strings.Builder
	b.WriteString(string(app.UID) + "@" + app.ResourceVersion)
	key := client.ObjectKeyFromObject(app)
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Service{}, &policyv1.PodDisruptionBudget{}} {
		switch err := r.Client.Get(ctx, key, obj); {
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
