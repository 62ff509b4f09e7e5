package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/test/cluster"
)

// TestExamplesApply: every manifest in manifests/examples (the seed's v1 examples, a v2 example of each feature)
// is accepted as it is by a server-side apply, and the operator writes the children it asks for.
func TestExamplesApply(t *testing.T) {
	installGatewayAPI(t)
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	files, err := filepath.Glob(filepath.Join(cluster.RepoRoot(), "manifests", "examples", "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("examples: %v %v", files, err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(raw, &u.Object); err != nil {
				t.Fatal(err)
			}
			u.SetNamespace(ns)
			if err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl")); err != nil {
				t.Fatalf("applying %s: %v", file, err)
			}
			children := []client.Object{&appsv1.Deployment{}, &corev1.Service{}}
			text := string(raw)
			if strings.Contains(text, "autoscaling:") {
				children = append(children, &autoscalingv2.HorizontalPodAutoscaler{})
			}
			if strings.Contains(text, "gateway:") {
				children = append(children, &gwv1.HTTPRoute{})
			}
			if strings.Contains(text, "ingress:") {
				children = append(children, &networkingv1.Ingress{})
			}
			if strings.Contains(text, "claim:") {
				children = append(children, &corev1.PersistentVolumeClaim{})
			}
			key := types.NamespacedName{Namespace: ns, Name: u.GetName()}
			for _, child := range children {
				if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
					return k8s.Get(ctx, key, child) == nil, nil
				}); err != nil {
					t.Errorf("%s: no %T %s", filepath.Base(file), child, key)
				}
			}
			app := &webappv2.WebApp{}
			if err := k8s.Get(context.Background(), key, app); err != nil {
				t.Fatal(err)
			}
			for _, c := range app.Status.Conditions {
				if c.Reason == "ReconcileError" || c.Reason == "InvalidChild" || c.Reason == "ApplyConflict" || c.Reason == "ApplyForbidden" {
					t.Errorf("%s: %s=%s %s: %s", filepath.Base(file), c.Type, c.Status, c.Reason, c.Message)
				}
			}
		})
	}
}
