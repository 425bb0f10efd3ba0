// Course runner: turns the lesson's fill-in cell into an editor with Run / Check / Stop, hints,
// saved work and a "download notebook" hand-in. Python runs in a web worker (runner-worker.js)
// through Pyodide served from the site itself.
//
// Where it attaches (first match on the page):
//   .course-runner              — the Quarto rendering (runner.lua wraps the exercise cell in it)
//   .celltag_course-exercise    — the preview (nbconvert's class for the cell tag "course-exercise")
// Written answers (explanation, Q1-Q3) get a text box under each answer area, matched by
// data-answer-id (Quarto: .course-answer) or, in the preview (.celltag_course-answer), by order.
// Where it reads from, relative to the site root:
//   assets/runner/runner-config.json   (written by coursekit.runner.write_config)
//   assets/pyodide/                    (or config "pyodide_url", e.g. a CDN folder ending in "/")
// The site root is this <script> tag's data-runner-root, else Quarto's <meta name="quarto:offset">,
// else two folders above this script (assets/runner/runner.js). data-runner-config and
// data-pyodide-url on the <script> tag override the config and Pyodide locations.
//
// Start-up: the config is fetched as soon as this script runs; when it says "preload" (the exercise
// page) Pyodide starts loading at once, before the page is even parsed; the widget attaches when
// the document is parsed. Load this file with `async` (see coursekit.runner.head_tags).
(() => {
  "use strict";

  const SCRIPT = document.currentScript || { dataset: {}, src: location.href };
  const HOST_SELECTOR = ".course-runner, .celltag_course-exercise";
  const ANSWER_SELECTOR = ".course-answer, .celltag_course-answer";
  const DEFAULT_TIME_LIMIT_S = 10;
  const RESET_CONFIRM_MS = 4000;
  const INDENT = "    ";
  const MAX_OUTPUT_CHARS = 50000; // more output than this is cut, so a print loop cannot swamp the page

  // ------------------------------------------------------------------ locations

  function siteRoot() {
    if (SCRIPT.dataset.runnerRoot !== undefined) return new URL(SCRIPT.dataset.runnerRoot || "./", location.href);
    const meta = document.querySelector('meta[name="quarto:offset"]');
    if (meta) return new URL(meta.content || "./", location.href);
    return new URL("../../", SCRIPT.src);
  }

  // ------------------------------------------------------------------ Python in a worker

  class StoppedError extends Error {}

  // One warm worker; a stop or a time-out terminates it and starts a fresh one. The first worker
  // also fetches the config and, when it says "preload", starts Pyodide at once: none of that
  // waits for the page's main thread, which is busy parsing and typesetting the lesson.
  class PythonSession {
    constructor(workerURL, root) {
      this.workerURL = workerURL;
      this.indexURL = null;
      this.listener = null;
      this.nextId = 1;
      this.job = null;
      this.config = new Promise((resolve, reject) => {
        this.configured = { resolve, reject };
      });
      this.config.catch(() => {});
      this.spawn();
      this.worker.postMessage({
        type: "boot",
        configURL: new URL(SCRIPT.dataset.runnerConfig || "assets/runner/runner-config.json", root).href,
        root: root.href,
        pyodideURL: SCRIPT.dataset.pyodideUrl || null,
      });
    }

    // The widget may subscribe after start-up began: it gets the current state at once.
    subscribe(listener) {
      this.listener = listener;
      listener(this.state, this.detail);
    }

    onState(state, detail) {
      this.state = state;
      this.detail = detail;
      if (this.listener) this.listener(state, detail);
    }

    close() {
      this.worker.terminate();
    }

    spawn() {
      this.worker = new Worker(this.workerURL, { type: "module" });
      this.started = false;
      this.ready = new Promise((resolve, reject) => {
        const fail = (message) => {
          this.onState("error", message);
          this.configured.reject(new Error(message));
          reject(new Error(message));
        };
        this.worker.onmessage = (event) => {
          const msg = event.data;
          if (msg.type === "config") {
            this.indexURL = msg.indexURL;
            if (msg.config.preload) this.markStarted();
            this.configured.resolve(msg.config);
          } else if (msg.type === "config-error" || msg.type === "init-error") {
            fail(msg.message);
          } else if (msg.type === "ready") {
            this.onState("ready");
            resolve();
          } else {
            this.receive(msg);
          }
        };
        this.worker.onerror = (event) => fail(event.message || "runner-worker.js failed to load");
      });
      this.ready.catch(() => {});
    }

    markStarted() {
      this.started = true;
      this.onState("loading");
    }

    // Make sure Pyodide is loading (after a "preload" config it already is).
    ensureStarted() {
      if (this.started) return;
      this.markStarted();
      this.worker.postMessage({ type: "init", indexURL: this.indexURL });
    }

    restart() {
      this.worker.terminate();
      this.spawn();
      this.ensureStarted();
    }

    receive(msg) {
      if (!this.job || msg.id !== this.job.id) return;
      if (msg.type === "stream") this.job.onStream(msg.name, msg.text);
      if (msg.type === "done") this.finish().resolve(msg.result);
      if (msg.type === "fatal") {
        this.finish().reject(new StoppedError(`Python 内部出错（${msg.message.split("\n")[0]}），已重新启动。`));
        this.restart();
      }
    }

    finish() {
      const job = this.job;
      clearTimeout(job.timer);
      this.job = null;
      return job;
    }

    // kind: "run" | "check"; resolves with the worker's result, rejects with StoppedError. The time
    // limit counts from when the worker gets the job, not while Pyodide is still loading.
    execute(kind, payload, onStream, timeLimitS) {
      const id = this.nextId++;
      return new Promise((resolve, reject) => {
        this.job = { id, resolve, reject, onStream, timer: null };
        this.ready.then(() => {
          if (!this.job || this.job.id !== id) return; // stopped while Pyodide was loading
          this.job.timer = setTimeout(
            () => this.stop(`运行超过 ${timeLimitS} 秒，已自动停止（是否有死循环？）`), timeLimitS * 1000);
          this.worker.postMessage({ type: kind, id, ...payload });
        }, (err) => {
          if (this.job && this.job.id === id) this.finish().reject(err);
        });
      });
    }

    // Ends the current job; a job the worker already has ends only with the worker itself.
    stop(reason) {
      if (!this.job) return;
      const started = this.job.timer !== null;
      this.finish().reject(new StoppedError(reason));
      if (started) this.restart();
    }
  }

  // ------------------------------------------------------------------ storage

  function storage() {
    try {
      return window.localStorage;
    } catch {
      return null;
    }
  }

  function makeStore(lessonId) {
    const prefix = `course-runner:v1:${location.pathname}:${lessonId}:`;
    const store = storage();
    return {
      get: (name) => (store ? store.getItem(prefix + name) : null),
      set: (name, value) => {
        try {
          store && store.setItem(prefix + name, value);
        } catch {
          /* storage full or disabled: the page still works, nothing is kept */
        }
      },
      remove: (name) => store && store.removeItem(prefix + name),
    };
  }

  // ------------------------------------------------------------------ DOM helpers

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    node.append(...children);
    return node;
  }

  function button(action, label, title) {
    return el("button", { type: "button", class: `cr-button cr-button-${action}`, "data-action": action, title }, label);
  }

  // ------------------------------------------------------------------ editor keys

  // Replace the selection with `text`, keeping the browser's undo history when it can.
  function insertText(editor, text) {
    if (!document.execCommand("insertText", false, text)) {
      editor.setRangeText(text, editor.selectionStart, editor.selectionEnd, "end");
      editor.dispatchEvent(new Event("input"));
    }
  }

  function indentKeys(editor, onShortcut) {
    let escaped = false;
    editor.addEventListener("keydown", (event) => {
      if (event.isComposing || event.keyCode === 229) return; // an input method (拼音) owns the keys
      if (event.key === "Escape") {
        escaped = true;
        return;
      }
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        onShortcut(event.shiftKey ? "check" : "run");
        return;
      }
      if (event.key === "Tab" && !escaped) {
        event.preventDefault();
        if (event.shiftKey) dedentLine(editor);
        else insertText(editor, INDENT);
        return;
      }
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        const before = editor.value.slice(0, editor.selectionStart);
        const line = before.slice(before.lastIndexOf("\n") + 1);
        insertText(editor, "\n" + line.match(/^\s*/)[0] + (/:\s*$/.test(line) ? INDENT : ""));
      }
      escaped = false;
    });
  }

  function dedentLine(editor) {
    const start = editor.value.lastIndexOf("\n", editor.selectionStart - 1) + 1;
    const removable = editor.value.slice(start, start + INDENT.length).match(/^ */)[0].length;
    if (!removable) return;
    editor.setSelectionRange(start, start + removable);
    if (!document.execCommand("delete")) {
      editor.setRangeText("", start, start + removable, "end");
      editor.dispatchEvent(new Event("input"));
    }
  }

  // ------------------------------------------------------------------ hand-in notebook

  function splitLines(text) {
    return text.match(/[^\n]*\n|[^\n]+$/g) || [];
  }

  function notebookWithAnswers(config, code, answers) {
    const nb = structuredClone(config.notebook);
    const setSource = (cell, text) => {
      cell.source = Array.isArray(cell.source) ? splitLines(text) : text;
    };
    for (const cell of nb.cells) {
      const id = cell.metadata && cell.metadata.nbgrader && cell.metadata.nbgrader.grade_id;
      if (id === config.answer_grade_id) setSource(cell, code);
      const area = config.answers.find((a) => a.grade_id === id);
      if (area && answers[id] && answers[id].trim()) setSource(cell, `${area.prompt}\n\n${answers[id].trim()}\n`);
    }
    return JSON.stringify(nb, null, 1) + "\n";
  }

  function downloadName(config, studentId) {
    const clean = studentId.trim().replace(/[^\w.-]+/g, "_").replace(/^[._]+/, "");
    return `${clean || config.lesson_id}.ipynb`;
  }

  // ------------------------------------------------------------------ the widget

  class Runner {
    constructor(host, config, session) {
      this.host = host;
      this.config = config;
      this.store = makeStore(config.lesson_id);
      this.timeLimitS = Number(config.time_limit_s) || DEFAULT_TIME_LIMIT_S;
      this.build();
      this.answers = this.buildAnswers();
      this.session = session;
      session.subscribe((state, detail) => this.setState(state, detail));
    }

    build() {
      const c = this.config;
      this.editor = el("textarea", { class: "cr-editor", spellcheck: "false", autocapitalize: "off",
                                     autocomplete: "off", "aria-label": "代码编辑器（Tab 缩进，Esc 后 Tab 离开；Ctrl+Enter 运行）" });
      this.editor.value = this.store.get("code") ?? c.starter_code;
      this.editor.rows = Math.min(40, Math.max(12, this.editor.value.split("\n").length + 1));
      this.status = el("span", { class: "cr-status", role: "status" });
      this.studentId = el("input", { class: "cr-student-id", type: "text", placeholder: "学号", size: "10",
                                     "aria-label": "学号（下载文件名）" });
      this.studentId.value = this.store.get("student-id") ?? "";
      this.buttons = {
        run: button("run", "▶ 运行", "运行代码，显示输出（Ctrl+Enter）"),
        check: button("check", "✔ 检查", "用可见检查测试你的代码（Ctrl+Shift+Enter）"),
        stop: button("stop", "■ 停止", "停止正在运行的代码"),
        reset: button("reset", "↺ 重新开始", "丢弃你的代码，恢复初始填空"),
        download: button("download", "⬇ 下载 notebook", "下载可提交给自动评分的 .ipynb"),
      };
      this.buttons.stop.disabled = true;
      this.checks = el("div", { class: "cr-checks", "aria-live": "polite" });
      this.output = el("pre", { class: "cr-output", "aria-live": "polite" });
      this.hintList = el("div", { class: "cr-hint-list" });
      this.hintButton = button("hint", "", "打开下一级提示");
      const hints = el("aside", { class: "cr-hints" }, el("div", { class: "cr-hints-title", text: "提示" }),
                       this.hintList, this.hintButton);
      if (!c.hints.length) hints.hidden = true;

      this.root = el("section", { class: "cr-widget", "data-state": "loading", "aria-label": "在线练习" },
        el("div", { class: "cr-toolbar" }, ...Object.values(this.buttons), this.studentId, this.status),
        el("div", { class: "cr-body" }, this.editor, hints),
        this.checks, this.output);
      for (const child of this.host.children) child.hidden = true;
      this.host.classList.add("cr-host");
      this.host.append(this.root);

      indentKeys(this.editor, (action) => this.act(action));
      this.editor.addEventListener("input", () => this.store.set("code", this.editor.value));
      this.studentId.addEventListener("input", () => this.store.set("student-id", this.studentId.value));
      this.root.querySelector(".cr-toolbar").addEventListener("click", (e) => this.onClick(e));
      this.hintButton.addEventListener("click", () => this.revealHint());
      const shown = Number(this.store.get("hints") || 0);
      for (let i = 0; i < Math.min(shown, c.hints.length); i++) this.revealHint();
      this.updateHintButton();
    }

    // {grade_id: textarea} for the written answers found on the page.
    buildAnswers() {
      const hosts = [...document.querySelectorAll(ANSWER_SELECTOR)];
      const boxes = {};
      this.config.answers.forEach((area, index) => {
        const host = hosts.find((h) => h.dataset.answerId === area.grade_id)
          || hosts.filter((h) => !h.dataset.answerId)[index];
        if (!host) return;
        const box = el("textarea", { class: "cr-answer", rows: "6", "data-answer-id": area.grade_id,
                                     placeholder: `在此作答（${area.title}）：保存在本浏览器，随“下载 notebook”一并提交`,
                                     "aria-label": `${area.title} 的答案` });
        box.value = this.store.get(`answer:${area.grade_id}`) ?? "";
        box.addEventListener("input", () => this.store.set(`answer:${area.grade_id}`, box.value));
        host.append(box);
        boxes[area.grade_id] = box;
      });
      return boxes;
    }

    onClick(event) {
      const target = event.target.closest("button[data-action]");
      if (target) this.act(target.dataset.action);
    }

    act(action) {
      if (action === "run" || action === "check") {
        if (!this.buttons[action].disabled) this.execute(action);
      } else if (action === "stop") {
        this.session.stop("已停止。");
      } else if (action === "reset") {
        this.reset();
      } else if (action === "download") {
        this.download();
      }
    }

    setState(state, detail) {
      if (state === "loading") this.status.textContent = "正在加载 Python…";
      if (state === "ready") this.status.textContent = "Python 已就绪";
      if (state === "error") this.status.textContent = `Python 加载失败：${detail}`;
      this.root.dataset.state = state;
    }

    setBusy(busy) {
      this.buttons.run.disabled = busy;
      this.buttons.check.disabled = busy;
      this.buttons.stop.disabled = !busy;
      this.root.dataset.busy = busy ? "true" : "false";
    }

    // Streamed output stops at MAX_OUTPUT_CHARS; `always` is for the runner's own messages.
    appendOutput(name, text, always = false) {
      if (always) {
        this.output.append(el("span", { class: `cr-${name}`, text }));
        return;
      }
      if (this.outputChars > MAX_OUTPUT_CHARS) return;
      this.outputChars += text.length;
      if (this.outputChars > MAX_OUTPUT_CHARS) text = "\n（输出过长，后面的部分未显示）\n";
      this.output.append(el("span", { class: `cr-${name}`, text }));
    }

    clearOutput() {
      this.output.textContent = "";
      this.outputChars = 0;
    }

    async execute(kind) {
      this.setBusy(true);
      this.clearOutput();
      if (kind === "check") this.checks.replaceChildren(el("p", { class: "cr-pending", text: "正在检查…" }));
      this.status.textContent = kind === "run" ? "正在运行…" : "正在检查…";
      const started = performance.now();
      try {
        const payload = { code: this.editor.value };
        if (kind === "check") payload.checks = this.config.checks;
        const result = await this.session.execute(kind, payload, (name, text) => this.appendOutput(name, text),
                                                  this.timeLimitS);
        if (kind === "run") this.showRun(result);
        else this.showChecks(result);
        const ms = Math.round(performance.now() - started);
        this.status.textContent = `${kind === "run" ? "运行" : "检查"}完成（${ms} 毫秒）`;
      } catch (err) {
        const message = err instanceof StoppedError ? err.message : `出错：${err.message}`;
        this.appendOutput("stderr", `${message}\n`, true);
        if (kind === "check") this.checks.replaceChildren(el("p", { class: "cr-stopped", text: message }));
        this.status.textContent = err instanceof StoppedError ? "已停止，正在重新启动 Python…" : message;
      } finally {
        this.setBusy(false);
        this.root.dataset.completed = String(Number(this.root.dataset.completed || 0) + 1);
      }
    }

    showRun(result) {
      if (result.error) this.appendOutput("stderr", result.error, true);
      if (!this.output.textContent) this.output.textContent = "（运行结束，没有输出）";
    }

    showChecks(result) {
      const items = result.results.map((r) => el("li", {
        class: `cr-check cr-${r.passed ? "pass" : "fail"}`, "data-check-id": r.id,
        "data-status": r.passed ? "pass" : "fail",
      }, el("span", { class: "cr-mark", "aria-hidden": "true", text: r.passed ? "✓" : "✗" }),
      el("span", { class: "cr-check-title", text: `${r.title}：${r.passed ? "通过" : "未通过"}` }),
      ...(r.passed ? [] : [el("pre", { class: "cr-message", text: r.message })])));
      const passed = result.results.filter((r) => r.passed).length;
      const total = result.results.length;
      const summary = passed === total ? `全部 ${total} 组检查通过。` : `${total} 组检查中通过 ${passed} 组。`;
      const parts = [el("p", { class: "cr-summary", "data-passed": String(passed), "data-total": String(total),
                               text: summary })];
      if (result.setup_error) {
        parts.push(el("div", { class: "cr-setup-error" },
          el("span", { text: "你的代码本身运行出错（各组检查仍照常进行）：" }),
          el("pre", { class: "cr-message", text: result.setup_error })));
      }
      this.checks.replaceChildren(...parts, el("ul", { class: "cr-check-list" }, ...items));
    }

    reset() {
      const button = this.buttons.reset;
      if (!button.dataset.armed) {
        button.dataset.armed = "true";
        button.textContent = "↺ 确认重新开始？";
        this.resetTimer = setTimeout(() => this.disarmReset(), RESET_CONFIRM_MS);
        return;
      }
      this.disarmReset();
      this.editor.value = this.config.starter_code;
      this.store.remove("code");
      this.checks.replaceChildren();
      this.clearOutput();
      this.status.textContent = "已恢复为初始填空";
    }

    disarmReset() {
      clearTimeout(this.resetTimer);
      delete this.buttons.reset.dataset.armed;
      this.buttons.reset.textContent = "↺ 重新开始";
    }

    revealHint() {
      const hint = this.config.hints[this.hintList.children.length];
      if (!hint) return;
      const body = el("div", { class: "cr-hint-body" });
      body.innerHTML = hint.html;
      const item = el("div", { class: "cr-hint", "data-level": String(hint.level) },
                      el("div", { class: "cr-hint-title", text: `提示 ${hint.level}：${hint.title}` }), body);
      this.hintList.append(item);
      this.store.set("hints", String(this.hintList.children.length));
      this.updateHintButton();
      if (window.MathJax && window.MathJax.typesetPromise) window.MathJax.typesetPromise([body]).catch(() => {});
    }

    updateHintButton() {
      const next = this.config.hints[this.hintList.children.length];
      this.hintButton.hidden = !next;
      if (next) this.hintButton.textContent = `显示提示 ${next.level}：${next.title}`;
    }

    download() {
      const answers = Object.fromEntries(Object.entries(this.answers).map(([id, box]) => [id, box.value]));
      const text = notebookWithAnswers(this.config, this.editor.value, answers);
      const blob = new Blob([text], { type: "application/x-ipynb+json" });
      const link = el("a", { href: URL.createObjectURL(blob), download: downloadName(this.config, this.studentId.value) });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 1000);
      this.status.textContent = `已下载 ${link.download}：交给老师，或用 make grade 评分`;
    }
  }

  // ------------------------------------------------------------------ start

  function whenParsed(callback) {
    if (document.readyState !== "loading") {
      callback();
      return;
    }
    document.addEventListener("readystatechange", function parsed() {
      document.removeEventListener("readystatechange", parsed);
      callback();
    });
  }

  async function boot() {
    const session = new PythonSession(new URL("runner-worker.js", SCRIPT.src).href, siteRoot());
    let config;
    try {
      config = await session.config;
    } catch (err) {
      session.close();
      whenParsed(() => {
        const host = document.querySelector(HOST_SELECTOR);
        if (host) host.prepend(el("p", { class: "cr-load-error", text: `在线练习无法加载：${err.message}` }));
      });
      return;
    }
    whenParsed(() => {
      const host = document.querySelector(HOST_SELECTOR);
      if (!host) {
        session.close();
        return;
      }
      session.ensureStarted();
      host.courseRunner = new Runner(host, config, session);
    });
  }

  boot();
})();
