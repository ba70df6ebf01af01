// Package api embeds the OpenAPI document of nsbox serve, the file
// openapi.json beside this one, which the service serves at
// /v1/openapi.json. Its Result schema is docs/result.schema.json's; the
// service's tests check the document against the routes, the result
// schema and real responses, and regenerate it with -update.
package api

import _ "embed"

// OpenAPI is the document, as JSON.
//
//go:embed openapi.json
var OpenAPI []byte
