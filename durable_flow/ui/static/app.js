// durable-flow UI: the few behaviours htmx attributes do not cover. No inline
// scripts anywhere (the Content-Security-Policy forbids them).
(function () {
  "use strict";

  // Answers with problems come back as 422 with the form to show, and an answer
  // to someone else's request as 403 with a card saying so: swap those too.
  function configure() {
    if (!window.htmx) return;
    htmx.config.responseHandling = [
      { code: "204", swap: false },
      { code: "[23]..", swap: true },
      { code: "422", swap: true },
      { code: "403", swap: true },  // a request that is not theirs: the card says so
      { code: "[45]..", swap: false, error: true },
    ];
  }

  // Array fields: add a row from the field's <template>, remove a row.
  var rowCounter = 0;
  document.addEventListener("click", function (event) {
    var add = event.target.closest("[data-add-row]");
    if (add) {
      var group = add.closest("fieldset");
      var template = group.querySelector(":scope > template");
      var index = "n" + Date.now().toString(36) + (rowCounter++);
      var html = template.innerHTML.split(add.dataset.placeholder).join(index);
      group.querySelector(":scope > .rows").insertAdjacentHTML("beforeend", html);
      return;
    }
    var remove = event.target.closest("[data-remove-row]");
    if (remove) remove.closest(".row").remove();
  });

  // A problem shown beside a field goes once that field is changed: the page never shows
  // an old problem next to a new value (sending the form checks everything again).
  function clearProblem(event) {
    var el = event.target;
    var field = el.closest ? el.closest("[data-field]") : null;
    while (field) {
      var name = field.dataset.field;
      field.classList.remove("invalid");
      field.querySelectorAll("[data-error-for]").forEach(function (problem) {
        if (problem.dataset.errorFor === name) problem.remove();
      });
      field = field.parentElement ? field.parentElement.closest("[data-field]") : null;
    }
  }
  document.addEventListener("input", clearProblem);
  document.addEventListener("change", clearProblem);

  // Times in the viewer's own time zone (the server writes UTC; the title keeps it).
  function localTimes(root) {
    root.querySelectorAll("time[data-local]").forEach(function (el) {
      var at = new Date(el.getAttribute("datetime"));
      if (isNaN(at.getTime()) || el.dataset.shown) return;
      el.title = el.textContent;
      el.textContent = at.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
      el.dataset.shown = "1";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localTimes(document); });
  document.addEventListener("htmx:afterSwap", function (event) { localTimes(event.target); });

  // A confirmation before forms that cannot be undone (cancel).
  document.addEventListener("submit", function (event) {
    var form = event.target.closest("form[data-confirm]");
    if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
  });

  // Live refresh of a running run: poll the JSON API, and when the run's head
  // or status moved, reload the page's run section through htmx.
  function watch() {
    var main = document.getElementById("run-main");
    if (!main || !main.dataset.live) return;
    var url = "/api/runs/" + encodeURIComponent(main.dataset.run);
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (run) {
        if (!run) return setTimeout(watch, 2000);
        if (run.head_checkpoint_id === (main.dataset.head || null) && run.status === main.dataset.status) {
          return setTimeout(watch, 1000);
        }
        // the run's summary part, then its internals (the stream between them is kept)
        htmx.ajax("GET", window.location.href, { target: "#run-main", select: "#run-main", swap: "outerHTML" })
          .then(function () {
            if (!document.getElementById("run-inside")) return null;
            return htmx.ajax("GET", window.location.href, { target: "#run-inside", select: "#run-inside", swap: "outerHTML" });
          })
          .then(function () { setTimeout(watch, 1000); });
      })
      .catch(function () { setTimeout(watch, 2000); });
  }

  // The run's stream log, live over server-sent events (GET /api/runs/ID/stream).
  // The browser reconnects by itself with Last-Event-ID, so nothing is lost or
  // shown twice. A model attempt a later one replaced is struck through (cut).
  function followStream() {
    var box = document.getElementById("stream");
    if (!box || !window.EventSource) return;
    var log = document.getElementById("stream-log");
    var state = document.getElementById("stream-state");
    var rounds = {};
    var source = new EventSource("/api/runs/" + encodeURIComponent(box.dataset.run) + "/stream?after=0");
    source.onopen = function () { state.textContent = "live"; };
    source.onerror = function () { state.textContent = "reconnecting"; };
    source.addEventListener("entry", function (event) {
      var entry = JSON.parse(event.data);
      var empty = document.getElementById("stream-empty");
      if (empty) empty.remove();
      box.hidden = false;  // shown once something streamed: most runs never stream
      if (entry.kind === "model_delta") return delta(entry);
      var line = document.createElement("div");
      line.className = "tool " + entry.kind;
      var d = entry.data;
      // in words: "checker uses receipts (claimant: erik)", "receipts answered: ..."
      line.textContent = entry.kind === "tool_started"
        ? entry.node + " uses " + d.tool + words(d.arguments)
        : d.tool + (d.error ? " failed: " + d.error : " answered: " + text(d.result));
      log.appendChild(line);
    });
    source.addEventListener("end", function () {
      source.close();
      state.textContent = "ended";
    });

    function text(value) {
      if (value === undefined || value === null) return "";
      return typeof value === "string" ? value : JSON.stringify(value);
    }

    function words(args) {
      var keys = Object.keys(args || {});
      if (!keys.length) return "";
      return " (" + keys.map(function (k) { return k.replace(/_/g, " ") + ": " + text(args[k]); }).join(", ") + ")";
    }

    function delta(entry) {
      var key = [entry.namespace, entry.node, entry.superstep, entry.data.round].join("|");
      var attempt = entry.epoch * 1000 + (entry.data.attempt || 1);
      var current = rounds[key];
      if (!current || current.attempt !== attempt) {
        if (current && attempt > current.attempt) current.el.classList.add("cut");
        var el = document.createElement("div");
        el.className = "delta" + (entry.cut ? " cut" : "");
        var who = document.createElement("span");
        who.className = "who mono";
        who.textContent = entry.node + " ";
        var text = document.createTextNode("");
        el.appendChild(who);
        el.appendChild(text);
        log.appendChild(el);
        current = rounds[key] = { attempt: attempt, el: el, text: text };
      }
      current.text.appendData(entry.data.text || "");
    }
  }

  function drawGraphs() {
    if (window.mermaid && document.querySelector("div.mermaid")) {
      mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "neutral", flowchart: { useMaxWidth: false } });
      mermaid.run({ querySelector: "div.mermaid:not([data-processed])" });
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    configure();
    drawGraphs();
    followStream();
    setTimeout(watch, 1000);
  });
  document.addEventListener("htmx:afterSettle", function () {
    drawGraphs();
    // an answer given on a run's page: follow the run as it continues
    var main = document.getElementById("run-main");
    if (main && !main.dataset.live && main.querySelector("article.request.answered")) {
      main.dataset.live = "1";
      setTimeout(watch, 500);
    }
  });
})();
