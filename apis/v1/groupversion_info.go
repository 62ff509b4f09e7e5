package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the WebApp API.
	GroupVersion = schema.GroupVersion{Group: "example.com", Version: "v1"}

	// SchemeGroupVersion is GroupVersion under the name generated code (applyconfig/) expects.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the API's types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
