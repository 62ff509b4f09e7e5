package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	webappv1 "github.com/example/webapp-operator/apis/v1"
	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/conversion"
	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

// An editor of WebApps runs pods as any ServiceAccount of the namespace; the example policy of docs/install-and-operate.md
// (manifests/policies/webapp-service-accounts.yaml, applied as it is) bounds that to the default ServiceAccount and
// the one named after the WebApp, in v2 and through v1's conversion data alike, and leaves alone a WebApp whose
// ServiceAccount does not change.
func TestAPolicyBoundsTheServiceAccountsOfWebApps(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(cluster.RepoRoot(), "manifests", "policies", "webapp-service-accounts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl")); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), u) })
	}
	// Created before the namespace is bound: it keeps its ServiceAccount through edits.
	if err := k8s.Create(ctx, withServiceAccount(ns, "before", "admin")); err != nil {
		t.Fatal(err)
	}
	update(t, "", ns, &corev1.Namespace{}, func(n *corev1.Namespace) {
		n.Labels["webapp.example.com/restrict-service-accounts"] = "true"
	})
	// The API server compiles the policy and sees the binding a moment later: dry runs until it refuses.
	testutil.Eventually(t, 30*time.Second, "the policy in force", func(ctx context.Context) error {
		err := k8s.Create(ctx, withServiceAccount(ns, "probe", "admin"), client.DryRunAll)
		if err == nil {
			return fmt.Errorf("a WebApp running as admin is accepted")
		}
		if !strings.Contains(err.Error(), "not admin") {
			return fmt.Errorf("refused for another reason: %w", err)
		}
		return nil
	})

	for _, tc := range []struct {
		name, sa string
		refused  bool
	}{
		{"web", "web", false},      // named after the WebApp
		{"plain", "", false},       // the default ServiceAccount
		{"dflt", "default", false}, // named
		{"bad", "admin", true},
		{"other", "web", true}, // another WebApp's
	} {
		err := k8s.Create(ctx, withServiceAccount(ns, tc.name, tc.sa))
		switch {
		case tc.refused && (err == nil || !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "not "+tc.sa)):
			t.Errorf("%s as %q: error %v, want the policy's refusal", tc.name, tc.sa, err)
		case !tc.refused && err != nil:
			t.Errorf("%s as %q: refused: %v", tc.name, tc.sa, err)
		}
	}
	if err := get(ctx, ns, "bad", &webappv2.WebApp{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused WebApp is stored: %v", err)
	}

	// A change to another ServiceAccount is refused; the WebApp from before keeps its own through an edit.
	app := &webappv2.WebApp{}
	if err := get(ctx, ns, "web", app); err != nil {
		t.Fatal(err)
	}
	app.Spec.Pod.ServiceAccountName = "admin"
	if err := k8s.Update(ctx, app); err == nil || !strings.Contains(err.Error(), "not admin") {
		t.Errorf("web changed to admin: error %v, want the policy's refusal", err)
	}
	update(t, ns, "before", &webappv2.WebApp{}, func(a *webappv2.WebApp) { a.Spec.Image = "y" })

	// v1 has no serviceAccountName, but a v1 write's conversion data can carry one: the policy judges the v2 form.
	data, err := json.Marshal(map[string]any{"spec": map[string]any{"pod": map[string]any{"serviceAccountName": "admin"}}})
	if err != nil {
		t.Fatal(err)
	}
	v1 := &webappv1.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "legacy", Annotations: map[string]string{conversion.LegacyDataAnnotation: string(data)}},
		Spec: webappv1.WebAppSpec{Image: "x"}}
	if err := k8s.Create(ctx, v1); err == nil || !strings.Contains(err.Error(), "not admin") {
		t.Errorf("v1 with conversion data running as admin: error %v, want the policy's refusal", err)
	}
}

// withServiceAccount is a v2 WebApp whose pods run as sa ("": unset).
func withServiceAccount(ns, name, sa string) *webappv2.WebApp {
	return &webappv2.WebApp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: webappv2.WebAppSpec{Image: "x", Pod: webappv2.PodSpec{ServiceAccountName: sa}}}
}
