package desired

import (
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	webappv2 "github.com/example/webapp-operator/apis/v2"
	"github.com/example/webapp-operator/controller/canary"
	"github.com/example/webapp-operator/controller/internal/apptest"
)

func TestDesiredDeployment(t *testing.T) {
	cases := []struct {
		name     string
		app      *webappv2.WebApp
		replicas int32
		image    string
		port     int32
	}{
		{"nginx example", apptest.NewApp("nginx-app", 3, 80, "nginx:1.25"), 3, "nginx:1.25", 80},
		{"one replica, high port", apptest.NewApp("hello", 1, 8080, "example.org/hello@sha256:abc"), 1, "example.org/hello@sha256:abc", 8080},
		{"max values", apptest.NewApp("a", 10, 65535, "busybox"), 10, "busybox", 65535},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := apptest.Typed[appsv1.Deployment](t, mustDeployment(t, tc.app))
			if d.Name != tc.app.Name || d.Namespace != "ns" || d.Kind != "Deployment" || d.APIVersion != "apps/v1" {
				t.Errorf("identity = %s %s/%s %s", d.APIVersion, d.Namespace, d.Name, d.Kind)
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != tc.replicas {
				t.Errorf("replicas = %v, want %d", d.Spec.Replicas, tc.replicas)
			}
			wantSel := map[string]string{webappv2.LabelName: "webapp", webappv2.LabelInstance: tc.app.Name}
			if !maps.Equal(d.Spec.Selector.MatchLabels, wantSel) {
				t.Errorf("selector = %v, want %v", d.Spec.Selector.MatchLabels, wantSel)
			}
			wantLabels := map[string]string{webappv2.LabelName: "webapp", webappv2.LabelInstance: tc.app.Name, webappv2.LabelManagedBy: "webapp-operator"}
			for what, got := range map[string]map[string]string{"deployment": d.Labels, "pod template": d.Spec.Template.Labels} {
				if !maps.Equal(got, wantLabels) {
					t.Errorf("%s labels = %v, want %v", what, got, wantLabels)
				}
			}
			cs := d.Spec.Template.Spec.Containers
			if len(cs) != 1 || cs[0].Image != tc.image || len(cs[0].Ports) != 1 {
				t.Fatalf("containers = %+v", cs)
			}
			if p := cs[0].Ports[0]; p.Name != "http" || p.ContainerPort != tc.port || p.Protocol != corev1.ProtocolTCP {
				t.Errorf("port = %+v", p)
			}
			apptest.CheckOwner(t, d.OwnerReferences, tc.app)
		})
	}
}

func TestDesiredService(t *testing.T) {
	for _, port := range []int32{1, 80, 8080, 65535} {
		app := apptest.NewApp("svc", 2, port, "nginx")
		s := apptest.Typed[corev1.Service](t, Service(app, canary.Traffic{}))
		if s.Spec.Type != corev1.ServiceTypeClusterIP {
			t.Errorf("type = %q", s.Spec.Type)
		}
		if !maps.Equal(s.Spec.Selector, map[string]string{webappv2.LabelName: "webapp", webappv2.LabelInstance: "svc"}) {
			t.Errorf("selector = %v", s.Spec.Selector)
		}
		want := corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromString("http")}
		if len(s.Spec.Ports) != 1 || s.Spec.Ports[0] != want {
			t.Errorf("ports = %+v, want [%+v]", s.Spec.Ports, want)
		}
		apptest.CheckOwner(t, s.OwnerReferences, app)
	}
}

// mustDeployment is the desired Deployment of app with no inputs; an error fails the test.
func mustDeployment(t *testing.T, app *webappv2.WebApp) any {
	t.Helper()
	d, err := Deployment(app, Inputs{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
