package controller

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/desired"
	"github.com/example/webapp-operator/controller/internal/apptest"
	"github.com/example/webapp-operator/controller/ssa"
)

// What a resync of a converged WebApp costs in CPU: building the desired Deployment, extracting what our manager
// owns from the cached object and comparing the two. `make bench` prints the figures.

func BenchmarkDesiredDeployment(b *testing.B) {
	app := apptest.FullSpecApp()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := desired.Deployment(app, desired.Inputs{ConfigHash: "0123456789abcdef0123456789abcdef"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConvergedDeploymentDecision(b *testing.B) {
	app := apptest.FullSpecApp()
	env := newFakeEnv(b, app)
	r := &WebAppReconciler{Client: env}
	if _, err := r.Reconcile(context.Background(), reqFor(app)); err != nil {
		b.Fatal(err)
	}
	cached := &appsv1.Deployment{}
	if err := env.Get(context.Background(), types.NamespacedName{Namespace: app.Namespace, Name: app.Name}, cached); err != nil {
		b.Fatal(err)
	}
	hash, err := r.configHash(context.Background(), app)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		desired, err := desired.Deployment(app, desired.Inputs{ConfigHash: hash})
		if err != nil {
			b.Fatal(err)
		}
		owned, err := appsv1ac.ExtractDeployment(cached, webappv2.FieldManager)
		if err != nil {
			b.Fatal(err)
		}
		same, err := ssa.OwnedFieldsMatch[appsv1.Deployment](desired, owned)
		if err != nil || !same {
			b.Fatalf("converged Deployment compares unequal (%v)", err)
		}
	}
}

// A whole converged reconcile (the fake client's reads are dearer than the cache's).
func BenchmarkConvergedReconcile(b *testing.B) {
	app := apptest.NewApp("web", 1, 80, "nginx:1.25")
	env := newFakeEnv(b, app)
	r := &WebAppReconciler{Client: env}
	for range 3 {
		if _, err := r.Reconcile(context.Background(), reqFor(app)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Reconcile(context.Background(), reqFor(app)); err != nil {
			b.Fatal(err)
		}
	}
}

// What a resync walk costs per WebApp that no reconcile has taken yet (a cold start of many: each is enqueued
// every period until its turn comes).
func BenchmarkResyncOfWaitingWebApps(b *testing.B) {
	var apps []client.Object
	for i := range 100 {
		apps = append(apps, apptest.NewApp(fmt.Sprintf("web-%d", i), 1, 80, "nginx:1.25"))
	}
	env := newFakeEnv(b, apps...)
	r := &WebAppReconciler{Client: env}
	ch := make(chan event.GenericEvent, len(apps))
	b.ReportAllocs()
	for b.Loop() {
		r.resyncOnce(context.Background(), ch)
		for range len(apps) {
			<-ch
		}
	}
}
