package controller

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	webappv1 "github.com/example/webapp-operator/apis/v1"
)

// CacheOptions keep only what the operator manages in memory: Deployments and Services that carry our
// managed-by label (a cluster with thousands of unrelated ones costs nothing), and only one namespace's objects
// when namespace is set.
func CacheOptions(namespace string) cache.Options {
	ours := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})
	o := cache.Options{ByObject: map[client.Object]cache.ByObject{
		&appsv1.Deployment{}: {Label: ours},
		&corev1.Service{}:    {Label: ours},
	}}
	if namespace != "" {
		o.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	return o
}

// NewScheme is the scheme of the operator's clients: client-go's types and the WebApp API.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(webappv1.AddToScheme(s))
	return s
}
