package controller

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	webappv2 "github.com/example/webapp-operator/apis/v2"
)

// missingSources lists the ConfigMaps and Secrets that app's volumes mount and that do not exist, as
// `configmap "NAME" (volume "VOL")`, from the metadata cache (no read of the API server). An optional one is left
// out: the pods start without it.
func (r *WebAppReconciler) missingSources(ctx context.Context, app *webappv2.WebApp) ([]string, error) {
	var out []string
	for _, v := range app.Spec.Volumes {
		kind, name, optional := "", "", (*bool)(nil)
		switch {
		case v.ConfigMap != nil:
			kind, name, optional = "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Optional
		case v.Secret != nil:
			kind, name, optional = "Secret", v.Secret.Name, v.Secret.Optional
		default:
			continue
		}
		if optional != nil && *optional {
			continue
		}
		switch _, _, found, err := r.peek(ctx, kind, types.NamespacedName{Namespace: app.Namespace, Name: name}); {
		case err != nil:
			return nil, err
		case !found:
			out = append(out, fmt.Sprintf("%s %q (volume %q)", strings.ToLower(kind), name, v.Name))
		}
	}
	return out, nil
}
