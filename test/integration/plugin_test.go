package integration

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/plugin"
	"github.com/example/webapp-operator/test/cluster"
	"github.com/example/webapp-operator/test/testutil"
)

// updateGolden rewrites the plugin's golden outputs (go test ./test/integration -run TestPlugin -update).
var updateGolden = flag.Bool("update", false, "rewrite the golden outputs of kubectl-webapp")

// kubectlWebApp runs the plugin in this process against the test API server, as a user of system:masters, and
// returns its exit code, stdout and stderr.
func kubectlWebApp(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	user, err := testEnv.AddUser(envtest.User{Name: "plugin-user", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := plugin.Main(append([]string{"--kubeconfig", kubeconfig}, args...), genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	return code, out.String(), errOut.String()
}

// volatile are the parts of an output that differ from run to run: times, addresses, the test's namespace.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`), "<time>"},
	{regexp.MustCompile(`ClusterIP \d+\.\d+\.\d+\.\d+`), "ClusterIP <ip>"},
	{regexp.MustCompile(`it-[a-z0-9]{6}`), "<namespace>"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uid>"},
}

// normalized is s with its volatile parts replaced.
func normalized(s string) string {
	for _, v := range volatile {
		s = v.re.ReplaceAllString(s, v.with)
	}
	return s
}

// golden compares got, its volatile parts replaced, with testdata/plugin/name.golden (rewritten with -update), and
// checks that docs/kubectl-webapp.md shows it (with any time, address, namespace and UID in those places).
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = normalized(got)
	docs, err := os.ReadFile(filepath.Join(cluster.RepoRoot(), "docs", "kubectl-webapp.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(normalized(string(docs)), got) {
		t.Errorf("docs/kubectl-webapp.md does not show this output of kubectl webapp (%s):\n%s", name, got)
	}
	path := filepath.Join("testdata", "plugin", name+".golden")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("kubectl webapp output differs from %s (run with -update to accept it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// kubectl webapp get, explain and owners over a WebApp the operator converged, with a Service label another manager holds
// too and an annotation only it holds: their outputs as the golden files say, from the real API server's objects
// and managed fields.
func TestPluginShowsTheTreeAndTheOwners(t *testing.T) {
	ns := newNamespace(t)
	startOperator(t, ns, time.Second)
	ctx := context.Background()
	app := &webappv2.WebApp{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       webappv2.WebAppSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](3), Ports: []webappv2.Port{{Name: "http", Port: 8080}}},
	}
	if err := k8s.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, "the WebApp's status observes its spec", func(ctx context.Context) error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(app), app); err != nil {
			return err
		}
		if app.Status.ObservedGeneration != app.Generation || meta.FindStatusCondition(app.Status.Conditions, webappv2.ConditionReady) == nil {
			return fmt.Errorf("status %+v", app.Status)
		}
		return nil
	})
	// Another manager applies one of our labels with our value (shared), and an annotation of its own.
	svc := corev1ac.Service("web", ns).
		WithLabels(map[string]string{webappv2.LabelName: webappv2.AppName}).
		WithAnnotations(map[string]string{"platform.example.com/team": "payments"})
	if err := k8s.Apply(ctx, svc, client.FieldOwner("platform-team")); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := kubectlWebApp(t, "-n", ns, "get", "web")
	if code != 0 || errOut != "" {
		t.Fatalf("get: exit %d, stderr %q", code, errOut)
	}
	golden(t, "get", out)

	code, out, errOut = kubectlWebApp(t, "-n", ns, "explain", "web")
	if code != 0 || errOut != "" {
		t.Fatalf("explain: exit %d, stderr %q", code, errOut)
	}
	golden(t, "explain", out)

	code, out, errOut = kubectlWebApp(t, "-n", ns, "owners", "web", "--child", "Service")
	if code != 0 || errOut != "" {
		t.Fatalf("owners: exit %d, stderr %q", code, errOut)
	}
	golden(t, "owners-service", out)
	if !strings.Contains(out, ".metadata.labels.app.kubernetes.io/name") {
		t.Errorf("owners does not list the shared label:\n%s", out)
	}

	code, out, _ = kubectlWebApp(t, "-n", ns, "get", "web", "-o", "json")
	if code != 0 || !strings.HasPrefix(out, "{") {
		t.Errorf("get -o json: exit %d, output %q", code, out)
	}

	// A WebApp that is not there: kubectl's words and exit code.
	code, _, errOut = kubectlWebApp(t, "-n", ns, "get", "nothere")
	if code != 1 || !strings.HasPrefix(errOut, "Error from server (NotFound): ") {
		t.Errorf("get of a missing WebApp: exit %d, stderr %q; want 1 and kubectl's NotFound words", code, errOut)
	}
}
