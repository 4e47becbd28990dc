// Starts Swagger UI on this API's OpenAPI document. A file, not an inline script: the
// page's Content-Security-Policy runs scripts from the API's own origin only.
(function () {
  "use strict";
  var holder = document.getElementById("swagger-ui");
  // The way back from the page to the mount prefix ("./", or "../" from ".../docs/").
  var root = new URL(holder.getAttribute("data-root"), window.location.href);

  function fail(message) {
    var note = document.createElement("p");
    note.className = "docs-page-note";
    note.textContent = message;
    holder.replaceChildren(note);
  }

  fetch(new URL("openapi.json", root), { headers: { Accept: "application/json" } })
    .then(function (response) {
      if (!response.ok) {
        throw new Error("openapi.json answered " + response.status);
      }
      return response.json();
    })
    .then(function (spec) {
      // "Try it" goes to the server that served this page, whatever base URL the
      // document names: the page may only connect to its own origin.
      spec.servers = [{ url: root.href.replace(/\/$/, ""), description: "This server" }];
      window.ui = SwaggerUIBundle({
        spec: spec,
        dom_id: "#swagger-ui",
        deepLinking: true,
        docExpansion: "list",
        defaultModelsExpandDepth: 0,
        displayRequestDuration: true,
        // Swagger UI would otherwise ask validator.swagger.io for a badge.
        validatorUrl: null,
        // No `?url=` or `?configUrl=` from the address bar.
        queryConfigEnabled: false
      });
    })
    .catch(function (error) {
      fail("The API's OpenAPI document could not be loaded (" + error.message + ").");
    });
})();
