package integration

import (
	"context"
	"fmt"
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

// TestDocsWebAppsApply: every WebApp the README and docs/ show in a yaml block is one the API server accepts as it
// is written (a server-side dry run under the name of kubectl, through the conversion webhook for v1), so the docs
// cannot show a field or a form the CRD refuses. A block is a whole WebApp: a placeholder such as `{...}` would be
// refused, so the docs write real values.
func TestDocsWebAppsApply(t *testing.T) {
	ns := newNamespace(t)
	files, err := filepath.Glob(filepath.Join(cluster.RepoRoot(), "docs", "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("docs: %v %v", files, err)
	}
	files = append([]string{filepath.Join(cluster.RepoRoot(), "README.md")}, files...)
	blocks := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, block := range yamlBlocks(string(raw)) {
			if !strings.Contains(block.text, "kind: WebApp\n") {
				continue
			}
			blocks++
			name := fmt.Sprintf("%s:%d", filepath.Base(file), block.line)
			t.Run(name, func(t *testing.T) {
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(block.text), &u.Object); err != nil {
					t.Fatalf("block %d (line %d) is not YAML: %v", i, block.line, err)
				}
				u.SetNamespace(ns)
				if err := k8s.Apply(context.Background(), client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl"), client.DryRunAll); err != nil {
					t.Errorf("the WebApp at %s is refused: %v", name, err)
				}
			})
		}
	}
	if blocks < 4 {
		t.Errorf("found %d WebApps in the docs' yaml blocks; the README and docs/ show at least 4", blocks)
	}
}

// yamlBlock is a fenced yaml block of a Markdown file and the line its text starts on.
type yamlBlock struct {
	text string
	line int
}

// yamlBlocks are the ```yaml blocks of a Markdown text, in order.
func yamlBlocks(md string) []yamlBlock {
	var out []yamlBlock
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```yaml" {
			continue
		}
		start := i + 1
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		out = append(out, yamlBlock{text: strings.Join(lines[start:end], "\n") + "\n", line: start + 1})
		i = end
	}
	return out
}
