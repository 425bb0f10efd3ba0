// Course runner: turns the lesson's fill-in cell into a code editor (CodeMirror 6, editor.js) with
// Run / Check / Stop, the page's hints, saved work and a "download notebook" hand-in. Python runs in
// a web worker (runner-worker.js) through Pyodide served from the site itself.
//
// Where it attaches (first match on the page):
//   .course-runner              — the Quarto rendering (runner.lua wraps the exercise cell in it)
//   .celltag_course-exercise    — the preview (nbconvert's class for the cell tag "course-exercise")
// Written answers (explanation, Q1-Q3) get a text box under each answer area, matched by
// data-answer-id (Quarto: .course-answer) or, in the preview (.celltag_course-answer), by order.
// Hints: the page's own nested <details class="course-hint"> (both renderings); the runner keeps
// which levels are open and its 提示 button opens the next one. It has no hint panel of its own.
// Where it reads from, relative to the site root:
//   assets/runner/runner-config.json   (written by coursekit.runner.write_config)
//   assets/pyodide/                    (or data-pyodide-url on this <script> tag, e.g. a CDN folder)
// The site root is this <script> tag's data-runner-root, else Quarto's <meta name="quarto:offset">,
// else two folders above this script (assets/runner/runner.js). data-runner-config on the tag
// overrides the config location.
//
// Start-up: the worker starts Pyodide as soon as this script runs (put it first in <head>), while
// the page is parsed; the config loads meanwhile. The code shows at once in a plain textarea; the
// CodeMirror editor replaces it once Python has started (or when the student focuses the code). Pyodide's files stay in
// the browser's HTTP cache; after the first load, once the page is idle, a background worker stores
// a memory snapshot of a freshly started interpreter in Cache Storage, so later loads restore it
// instead of starting Python (see runner-worker.js). The widget shows how it started in
// data-start ("snapshot" | "fresh") and the snapshot's state in data-snapshot ("stored" | "failed").
//
// The page's other CPU work can wait for Python (on a 2-core machine it competes with the worker):
// <html data-course-runner-starting="true"> until Python is ready or has failed (then the event
// "course-runner-started"), and <html data-course-runner-busy="true"> while a Run or Check is
// pending (then "course-runner-idle", sent once the result has been painted). The CodeMirror editor
// waits by them, and so does MathJax's typesetting of the formulas away from the screen
// (assets/site/quarto-head.html, which the preview inlines).
(() => {
  "use strict";

  const SCRIPT = document.currentScript || { dataset: {}, src: location.href };
  const HOST_SELECTOR = ".course-runner, .celltag_course-exercise";
  const ANSWER_SELECTOR = ".course-answer, .celltag_course-answer";
  const HINT_SELECTOR = "details.course-hint";
  const DEFAULT_TIME_LIMIT_S = 10;
  const WATCHDOG_GRACE_S = 3; // beyond Python's own per-step limit, for code stuck outside Python
  const SNAPSHOT_IDLE_MS = 1500; // the start-up snapshot is made once the page has been idle this long
  const RESET_CONFIRM_MS = 4000;
  const MAX_OUTPUT_CHARS = 50000; // more output than this is cut, so a print loop cannot swamp the page
  const ICONS = { // drawn, not typed: no glyph depends on a font the page may lack
    pass: '<svg viewBox="0 0 16 16" aria-hidden="true"><path d="M3 8.5l3.2 3.2L13 4.8" fill="none" stroke="currentColor" stroke-width="2.2"/></svg>',
    fail: '<svg viewBox="0 0 16 16" aria-hidden="true"><path d="M4 4l8 8M12 4l-8 8" fill="none" stroke="currentColor" stroke-width="2.2"/></svg>',
  };

  // ------------------------------------------------------------------ the page's hold on its own work

  const hold = { starting: true, busy: false };

  // Marks <html> (see the header); an event goes out after the next frame, so the page paints what
  // changed (e.g. the Check results) before the work that waited runs.
  function setHold(change) {
    const was = { ...hold };
    Object.assign(hold, change);
    const html = document.documentElement;
    html.dataset.courseRunnerStarting = String(hold.starting);
    html.dataset.courseRunnerBusy = String(hold.busy);
    const afterPaint = (name, still) => requestAnimationFrame(() => setTimeout(() => {
      if (still()) document.dispatchEvent(new Event(name));
    }));
    if (was.starting && !hold.starting) afterPaint("course-runner-started", () => true);
    if (was.busy && !hold.busy) afterPaint("course-runner-idle", () => !hold.busy);
  }

  setHold({});

  // ------------------------------------------------------------------ locations

  function siteRoot() {
    if (SCRIPT.dataset.runnerRoot !== undefined) return new URL(SCRIPT.dataset.runnerRoot || "./", location.href);
    const meta = document.querySelector('meta[name="quarto:offset"]');
    if (meta) return new URL(meta.content || "./", location.href);
    return new URL("../../", SCRIPT.src);
  }

  // ------------------------------------------------------------------ Python in a worker

  class StoppedError extends Error {}
  class InterpreterDied extends Error {}

  // One warm worker; a stop, a stuck job or a dead interpreter terminates it and starts a fresh one.
  // The first worker fetches the config and starts Pyodide at once: neither waits for the page's
  // main thread, which is busy parsing and typesetting the lesson.
  class PythonSession {
    constructor(workerURL, root) {
      this.workerURL = workerURL;
      this.indexURL = new URL(SCRIPT.dataset.pyodideUrl || "assets/pyodide/", root).href;
      this.listener = null;
      this.nextId = 1;
      this.job = null;
      this.config = new Promise((resolve, reject) => {
        this.configured = { resolve, reject };
      });
      this.config.catch(() => {});
      this.spawn({
        type: "boot",
        configURL: new URL(SCRIPT.dataset.runnerConfig || "assets/runner/runner-config.json", root).href,
        indexURL: this.indexURL,
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
      if (state !== "loading") setHold({ starting: false });
      if (this.listener) this.listener(state, detail);
    }

    close() {
      this.worker.terminate();
    }

    // The boot message travels in the worker URL's fragment (see runner-worker.js): the worker
    // starts at once instead of when the page's busy main thread delivers a posted message.
    // A page whose <head> started the first worker already (window.courseRunnerWorker, from
    // coursekit.runner.head_tags: it starts before this script is fetched) has it adopted here,
    // with the events it got meanwhile, if it was started from the same URL (worker and boot).
    spawn(first) {
      const url = first.type === "boot" ? `${this.workerURL}#${encodeURIComponent(JSON.stringify(first))}` : this.workerURL;
      let early = first.type === "boot" ? window.courseRunnerWorker : undefined;
      delete window.courseRunnerWorker;
      if (early && early.url !== url) { // booted differently from this script's own boot: not adopted
        early.worker.terminate();
        early = undefined;
      }
      this.worker = early ? early.worker : new Worker(url, { type: "module" });
      this.onState("loading");
      this.ready = new Promise((resolve, reject) => {
        const fail = (message) => {
          this.onState("error", message);
          reject(new Error(message));
        };
        this.worker.onmessage = (event) => {
          const msg = event.data;
          if (msg.type === "config") {
            this.configured.resolve(msg.config);
          } else if (msg.type === "config-error") {
            this.configured.reject(new Error(msg.message));
          } else if (msg.type === "init-error") {
            fail(msg.message);
          } else if (msg.type === "ready") {
            this.fromSnapshot = msg.fromSnapshot;
            this.wantSnapshot = !msg.fromSnapshot && this.snapshot === undefined;
            this.onState("ready");
            this.scheduleSnapshot();
            resolve();
          } else {
            this.receive(msg);
          }
        };
        this.worker.onerror = (event) => {
          const message = event.message || "runner-worker.js failed to load";
          this.configured.reject(new Error(message));
          fail(message);
        };
      });
      this.ready.catch(() => {});
      if (first.type !== "boot") this.worker.postMessage(first);
      for (const event of early ? early.events : []) {
        if (event.type === "message") this.worker.onmessage(event);
        else this.worker.onerror(event);
      }
    }

    restart() {
      this.worker.terminate();
      this.spawn({ type: "init", indexURL: this.indexURL });
    }

    receive(msg) {
      if (!this.job || msg.id !== this.job.id) return;
      if (msg.type === "stream") this.job.onStream(msg.name, msg.text);
      if (msg.type === "done") this.finish().resolve(msg.result);
      if (msg.type === "fatal") {
        this.finish().reject(new InterpreterDied(msg.message.split("\n")[0]));
        this.restart();
      }
    }

    finish() {
      const job = this.job;
      clearTimeout(job.timer);
      this.job = null;
      this.scheduleSnapshot();
      return job;
    }

    // After a fresh (slow) start: once no job has run for SNAPSHOT_IDLE_MS, a separate worker makes
    // and stores the start-up snapshot (this worker has run student code, so it never is the source).
    scheduleSnapshot() {
      clearTimeout(this.snapshotTimer);
      if (!this.wantSnapshot) return;
      this.snapshotTimer = setTimeout(() => {
        if (this.job) return; // finish() schedules it again
        this.wantSnapshot = false;
        this.snapshot = "making";
        const maker = new Worker(this.workerURL, { type: "module" });
        maker.onmessage = (event) => {
          if (event.data.type !== "snapshot-done") return;
          maker.terminate();
          this.snapshot = event.data.stored ? "stored" : "failed";
          this.onState(this.state, this.detail);
        };
        maker.onerror = () => {
          maker.terminate();
          this.snapshot = "failed";
        };
        maker.postMessage({ type: "snapshot", indexURL: this.indexURL });
      }, SNAPSHOT_IDLE_MS);
    }

    // kind: "run" | "check". Python stops each step (the code, each check) after timeLimitS itself;
    // the watchdog (steps × limit + grace) only ends code stuck outside Python, with the worker.
    // Resolves with the worker's result; rejects with StoppedError or InterpreterDied.
    execute(kind, payload, onStream, timeLimitS, steps) {
      const id = this.nextId++;
      return new Promise((resolve, reject) => {
        this.job = { id, resolve, reject, onStream, timer: null };
        this.ready.then(() => {
          if (!this.job || this.job.id !== id) return; // stopped while Pyodide was loading
          this.job.timer = setTimeout(
            () => this.stop(`运行超过 ${timeLimitS * steps} 秒仍未结束，已强制停止并重新启动 Python。`),
            (timeLimitS * steps + WATCHDOG_GRACE_S) * 1000);
          this.worker.postMessage({ type: kind, id, timeLimitS, maxOutput: MAX_OUTPUT_CHARS, ...payload });
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
      else if (key === "html") node.innerHTML = value;
      else node.setAttribute(key, value);
    }
    node.append(...children);
    return node;
  }

  function button(action, label, title) {
    return el("button", { type: "button", class: `cr-button cr-button-${action}`, "data-action": action, title }, label);
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

  // ------------------------------------------------------------------ the page's hints

  // The page's nested <details class="course-hint" data-level="N">: one widget, whose open levels
  // the runner keeps (store "hints" = how many levels are open) and whose next level its button opens.
  class Hints {
    constructor(store, onChange) {
      this.levels = [...document.querySelectorAll(HINT_SELECTOR)]
        .sort((a, b) => Number(a.dataset.level) - Number(b.dataset.level));
      this.store = store;
      const open = Number(store.get("hints") || 0);
      this.levels.forEach((level, index) => {
        if (index < open) level.open = true;
        level.addEventListener("toggle", () => {
          store.set("hints", String(this.opened()));
          onChange();
        });
      });
    }

    get present() {
      return this.levels.length > 0;
    }

    opened() {
      const closed = this.levels.findIndex((level) => !level.open);
      return closed < 0 ? this.levels.length : closed;
    }

    next() {
      return this.levels[this.opened()] || null;
    }

    // Opens the next level and brings it into view; returns its title, or null when all are open.
    openNext() {
      const level = this.next();
      if (!level) return null;
      level.open = true;
      this.store.set("hints", String(this.opened()));
      level.scrollIntoView({ block: "nearest", behavior: "smooth" });
      return level;
    }
  }

  // ------------------------------------------------------------------ the code area

  // The student's code: a plain <textarea> holding it from the start, replaced by the CodeMirror editor
  // (editor.js) once Python has started and no Run or Check is pending, or at once when the student
  // focuses the code. Building CodeMirror (loading its bundle, the editor, its first measure) took
  // 0.25-0.45 s of main thread, which on a 2-core machine delayed Python's start in the worker almost
  // one for one (issue 12, start-up). What is typed into the textarea meanwhile, and where the caret
  // is, goes over to the editor; the code is read from whichever holds it, so Check is always right.
  class CodeArea {
    constructor(parent, options, loadEditor) {
      this.parent = parent;
      this.options = options;
      this.loadEditor = loadEditor;
      this.editor = null;
      this.built = null;
      this.plain = el("textarea", {
        class: "cr-plain-code", "aria-label": options.label, spellcheck: "false", autocapitalize: "off",
        autocomplete: "off", rows: String(Math.min(options.doc.split("\n").length + 1, 40)),
      });
      this.plain.value = options.doc;
      this.plain.addEventListener("input", () => options.onChange(this.plain.value));
      this.plain.addEventListener("keydown", (event) => {
        if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey)) return;
        event.preventDefault();
        if (event.shiftKey) options.onCheck();
        else options.onRun();
      });
      // a failure is reported once Python has started (Runner.buildEditorWhenIdle)
      this.plain.addEventListener("focus", () => this.build().catch(() => {}), { once: true });
      parent.dataset.editor = "plain";
      parent.append(this.plain);
    }

    getCode() {
      return this.editor ? this.editor.getCode() : this.plain.value;
    }

    setCode(text) {
      if (this.editor) {
        this.editor.setCode(text); // the editor's change listener calls onChange
      } else {
        this.plain.value = text;
        this.options.onChange(text);
      }
    }

    focus() {
      if (this.editor) this.editor.focus();
      else this.plain.focus(); // builds the editor, which takes the focus over
    }

    // Builds the editor once; resolves when it is in place (or the bundle failed: the textarea stays).
    build() {
      if (!this.built) {
        this.built = this.loadEditor().then((module) => {
          const focused = document.activeElement === this.plain;
          const { selectionStart, selectionEnd } = this.plain;
          this.editor = module.createEditor(this.parent, { ...this.options, doc: this.plain.value });
          this.plain.remove();
          this.parent.dataset.editor = "codemirror";
          if (focused) {
            this.editor.view.dispatch({ selection: { anchor: selectionStart, head: selectionEnd } });
            this.editor.focus();
          }
        }, (err) => {
          this.parent.dataset.editor = "plain";
          throw err;
        });
      }
      return this.built;
    }
  }

  // ------------------------------------------------------------------ the widget

  class Runner {
    constructor(host, config, session, loadEditor) {
      this.host = host;
      this.config = config;
      this.store = makeStore(config.lesson_id);
      this.timeLimitS = Number(config.time_limit_s) || DEFAULT_TIME_LIMIT_S;
      this.idRule = new RegExp(`^(?:${config.student_id.pattern})$`);
      this.busy = false;
      this.build(loadEditor);
      this.answers = this.buildAnswers();
      this.session = session;
      session.subscribe((state, detail) => this.setState(state, detail));
    }

    get code() {
      return this.editor.getCode();
    }

    set code(text) {
      this.editor.setCode(text);
    }

    build(loadEditor) {
      const c = this.config;
      this.status = el("span", { class: "cr-status", role: "status" });
      this.buttons = {
        run: button("run", "运行", "运行代码，显示输出（Ctrl+Enter）"),
        check: button("check", "检查", "用可见检查测试你的代码（Ctrl+Shift+Enter）"),
        stop: button("stop", "停止", "停止正在运行的代码"),
        reset: button("reset", "重新开始", "丢弃你的代码，恢复初始填空"),
        hint: button("hint", "提示", "打开页面上的下一级提示"),
        download: button("download", "下载 notebook", "下载可提交给自动评分的 .ipynb"),
      };
      this.buttons.stop.setAttribute("aria-disabled", "true");
      this.hints = new Hints(this.store, () => this.updateHintButton());
      this.buttons.hint.hidden = !this.hints.present;

      const idHelp = el("span", { class: "cr-id-rule", id: "cr-id-rule", text: c.student_id.rule });
      this.studentId = el("input", {
        class: "cr-student-id", id: "cr-student-id", type: "text", size: "12", autocomplete: "off",
        spellcheck: "false", placeholder: "例如 2024001", "aria-describedby": "cr-id-rule",
      });
      this.studentId.value = this.store.get("student-id") ?? "";
      const idField = el("span", { class: "cr-id-field" },
        el("label", { for: "cr-student-id", text: "学号" }), this.studentId, idHelp);

      this.editorHost = el("div", { class: "cr-editor", id: "cr-editor" });
      this.checks = el("div", { class: "cr-checks", "aria-live": "polite", tabindex: "-1" });
      this.output = el("pre", { class: "cr-output", "aria-live": "polite" });
      const { download, ...actions } = this.buttons;
      this.toolbar = el("div", { class: "cr-toolbar", role: "toolbar", "aria-label": "练习工具栏" },
        el("span", { class: "cr-actions" }, ...Object.values(actions)), this.status);
      const handIn = el("div", { class: "cr-handin" }, idField, download);
      this.root = el("section", { class: "cr-widget", "data-state": "loading", "aria-label": "在线练习", lang: "zh-CN" },
        this.toolbar, this.editorHost, this.checks, this.output, handIn);
      for (const child of this.host.children) child.hidden = true;
      this.host.classList.add("cr-host");
      this.host.append(this.root);
      this.addSkipLink();

      this.editor = new CodeArea(this.editorHost, {
        doc: this.store.get("code") ?? c.starter_code,
        label: "代码编辑器（Tab 缩进；先按 Esc 再按 Tab 离开编辑器；Ctrl+Enter 运行，Ctrl+Shift+Enter 检查）",
        onChange: (text) => this.store.set("code", text),
        onRun: () => this.act("run"),
        onCheck: () => this.act("check"),
      }, loadEditor);
      this.studentId.addEventListener("input", () => {
        this.store.set("student-id", this.studentId.value);
        this.validateId();
      });
      this.validateId();
      this.root.addEventListener("click", (e) => this.onClick(e));
      this.updateHintButton();
    }

    // "跳到练习" as the page's first tab stop: straight to the editor.
    addSkipLink() {
      const link = el("a", { class: "cr-skip-link", href: "#cr-editor", text: "跳到练习（代码编辑器）" });
      link.addEventListener("click", (event) => {
        event.preventDefault();
        this.root.scrollIntoView({ block: "start" });
        this.editor.focus();
      });
      document.body.prepend(link);
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
        if (!this.busy) this.execute(action);
      } else if (action === "stop") {
        if (this.busy) this.session.stop("已停止。");
      } else if (action === "reset") {
        this.reset();
      } else if (action === "hint") {
        const level = this.hints.openNext();
        if (level) {
          // where the opened hint is, as the page lays it out (the page's hint widget, not the runner's)
          const below = this.root.compareDocumentPosition(level) & Node.DOCUMENT_POSITION_FOLLOWING;
          const title = level.querySelector("summary").textContent.trim();
          this.status.textContent = `已打开${title}（在代码框${below ? "下方" : "上方"}）`;
        }
      } else if (action === "download") {
        this.download();
      }
    }

    setState(state, detail) {
      if (state === "loading") this.status.textContent = "正在加载 Python…";
      if (state === "ready" && !this.busy) this.status.textContent = "Python 已就绪";
      if (state === "error") this.status.textContent = `Python 加载失败：${detail}`;
      if (state !== "loading") this.buildEditorWhenIdle();
      this.root.dataset.state = state;
      if (this.session && this.session.fromSnapshot !== undefined) {
        this.root.dataset.start = this.session.fromSnapshot ? "snapshot" : "fresh";
      }
      if (this.session && this.session.snapshot) this.root.dataset.snapshot = this.session.snapshot;
    }

    // The CodeMirror editor once Python has started, after the next paint and after any pending
    // Run or Check (the page's hold), unless the student's focus built it already.
    buildEditorWhenIdle() {
      if (this.editorScheduled) return;
      this.editorScheduled = true;
      const build = () => {
        if (hold.busy) {
          document.addEventListener("course-runner-idle", build, { once: true });
          return;
        }
        this.editor.build().catch((err) => {
          this.status.textContent = `代码编辑器无法加载（${err.message}），代码仍可在文本框中编辑`;
        });
      };
      requestAnimationFrame(() => setTimeout(build));
    }

    // Buttons stay enabled (a disabled button would drop the keyboard focus to <body>); while busy
    // Run and Check say so with aria-disabled and ignore presses.
    setBusy(busy) {
      this.busy = busy;
      this.buttons.run.setAttribute("aria-disabled", String(busy));
      this.buttons.check.setAttribute("aria-disabled", String(busy));
      this.buttons.stop.setAttribute("aria-disabled", String(!busy));
      this.root.dataset.busy = busy ? "true" : "false";
      setHold({ busy }); // the editor's build waits for the result
    }

    // Output is capped in the worker; `always` is for the runner's own messages.
    appendOutput(name, text) {
      this.output.append(el("span", { class: `cr-${name}`, text }));
    }

    clearOutput() {
      this.output.textContent = "";
    }

    async execute(kind) {
      this.setBusy(true);
      this.clearOutput();
      if (kind === "check") this.checks.replaceChildren(el("p", { class: "cr-pending", text: "正在检查…" }));
      this.status.textContent = kind === "run" ? "正在运行…" : "正在检查…";
      const started = performance.now();
      const checks = this.config.checks;
      try {
        const payload = { code: this.code };
        if (kind === "check") Object.assign(payload, { checks, given: this.config.given_checks || null });
        const steps = kind === "check" ? checks.length + 1 : 1;
        const result = await this.session.execute(kind, payload, (name, text) => this.appendOutput(name, text),
                                                  this.timeLimitS, steps);
        if (kind === "run") this.showRun(result);
        else this.showChecks(result);
        const ms = Math.round(performance.now() - started);
        this.status.textContent = `${kind === "run" ? "运行" : "检查"}完成（${ms} 毫秒）`;
      } catch (err) {
        this.showFailure(kind, err);
      } finally {
        this.root.dataset.completed = String(Number(this.root.dataset.completed || 0) + 1);
        this.setBusy(false);
      }
    }

    // A stop, a stuck job or a dead interpreter: the message appears once, where the result would.
    showFailure(kind, err) {
      if (err instanceof InterpreterDied && kind === "check") {
        // As in the grader, whose kernel dies with it: no check can pass.
        const why = `你的代码结束了 Python 本身（${err.message}）。评分时也是这样：所有检查都不得分。`;
        this.showChecks({ setup_error: why, results: this.config.checks.map((c) => (
          { id: c.id, title: c.title, own_run: c.own_run, passed: false, message: "没有运行：Python 已被你的代码结束。" })) });
        this.status.textContent = "Python 已重新启动";
        return;
      }
      const message = err instanceof InterpreterDied ? `Python 内部出错（${err.message}），已重新启动。`
        : err instanceof StoppedError ? err.message : `出错：${err.message}`;
      if (kind === "check") this.checks.replaceChildren(el("p", { class: "cr-stopped", text: message }));
      else this.appendOutput("stderr", `${message}\n`);
      this.status.textContent = err instanceof Error && !(err instanceof StoppedError || err instanceof InterpreterDied)
        ? message : "已停止，Python 已重新启动";
    }

    showRun(result) {
      if (result.error) this.appendOutput("stderr", result.error);
      if (!this.output.textContent) this.output.textContent = "（运行结束，没有输出）";
    }

    showChecks(result) {
      const items = result.results.map((r) => {
        const ownRun = r.own_run && r.own_run.length;
        const title = `${r.title}${ownRun ? "（按你自己代码的运行结果计分）" : ""}：${r.passed ? "通过" : "未通过"}`;
        return el("li", { class: `cr-check cr-${r.passed ? "pass" : "fail"}`, "data-check-id": r.id,
                          "data-status": r.passed ? "pass" : "fail" },
          el("span", { class: "cr-mark", html: r.passed ? ICONS.pass : ICONS.fail }),
          el("span", { class: "cr-check-title", text: title }),
          ...(r.passed ? [] : [el("pre", { class: "cr-message", text: r.message })]));
      });
      const passed = result.results.filter((r) => r.passed).length;
      const total = result.results.length;
      const given = result.given_error ? "但题目给出的检查被删除或改动，评分时一票否决。" : "";
      const summary = (passed === total ? `全部 ${total} 组检查通过` : `${total} 组检查中通过 ${passed} 组`)
        + (given ? `，${given}` : "。");
      const parts = [el("p", { class: "cr-summary", "data-passed": String(passed), "data-total": String(total),
                               text: summary })];
      if (result.given_error) { // the rubric's veto (删除边界检查), named as `make check` names it
        const title = (this.config.given_checks || {}).title || "题目给出的检查";
        parts.push(el("div", { class: "cr-given-error" },
          el("span", { text: `${title}：` }), el("pre", { class: "cr-message", text: result.given_error })));
      }
      if (result.setup_error) {
        parts.push(el("div", { class: "cr-setup-error" },
          el("span", { text: "你的代码本身运行出错（各组检查仍照常进行）：" }),
          el("pre", { class: "cr-message", text: result.setup_error })));
      }
      this.checks.replaceChildren(...parts, el("ul", { class: "cr-check-list" }, ...items));
      this.revealResults();
    }

    // Bring the results into view (a laptop screen ends near the editor's bottom) without moving
    // the keyboard focus off the pressed button: the summary just below the toolbar at the highest, and
    // low enough that the first reason (a failed check's message, or the code's own error) ends on screen.
    revealResults() {
      const box = this.checks.getBoundingClientRect();
      const top = Math.max(this.toolbar.getBoundingClientRect().bottom, 0) + 8;
      const reason = this.checks.querySelector(".cr-given-error, .cr-setup-error, .cr-fail .cr-message");
      const bottom = (reason || this.checks.querySelector(".cr-summary") || this.checks)
        .getBoundingClientRect().bottom + 16;
      const by = box.top < top ? box.top - top
        : bottom > window.innerHeight ? Math.min(box.top - top, bottom - window.innerHeight) : 0;
      if (by) window.scrollBy({ top: by, behavior: "instant" });
    }

    reset() {
      const reset = this.buttons.reset;
      if (!reset.dataset.armed) {
        reset.dataset.armed = "true";
        reset.textContent = "确认重新开始？";
        this.resetTimer = setTimeout(() => this.disarmReset(), RESET_CONFIRM_MS);
        return;
      }
      this.disarmReset();
      this.code = this.config.starter_code;
      this.store.remove("code");
      this.checks.replaceChildren();
      this.clearOutput();
      this.status.textContent = "已恢复为初始填空";
    }

    disarmReset() {
      clearTimeout(this.resetTimer);
      delete this.buttons.reset.dataset.armed;
      this.buttons.reset.textContent = "重新开始";
    }

    updateHintButton() {
      const next = this.hints.next();
      this.buttons.hint.setAttribute("aria-disabled", String(!next));
      this.buttons.hint.textContent = next ? `提示（第 ${next.dataset.level} 级）` : "提示已全部打开";
    }

    // As the grader reads it: the whole id must match the rule, else nothing is saved under it.
    validateId() {
      const value = this.studentId.value.trim();
      const ok = this.idRule.test(value);
      this.studentId.setAttribute("aria-invalid", String(value !== "" && !ok));
      this.root.dataset.studentId = value === "" ? "empty" : ok ? "valid" : "invalid";
      return ok ? value : null;
    }

    download() {
      const id = this.validateId();
      if (!id) {
        this.status.textContent = this.studentId.value.trim()
          ? `学号“${this.studentId.value.trim()}”不符合规则：${this.config.student_id.rule}`
          : `请先填写学号（${this.config.student_id.rule}）`;
        return;
      }
      const answers = Object.fromEntries(Object.entries(this.answers).map(([key, box]) => [key, box.value]));
      const text = notebookWithAnswers(this.config, this.code, answers);
      const blob = new Blob([text], { type: "application/x-ipynb+json" });
      const link = el("a", { href: URL.createObjectURL(blob), download: `${id}.ipynb` });
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
    const root = siteRoot();
    const session = new PythonSession(new URL("runner-worker.js", SCRIPT.src).href, root);
    const loadEditor = () => import(new URL("editor.js", SCRIPT.src).href);
    let config;
    try {
      config = await session.config;
    } catch (err) {
      session.close();
      setHold({ starting: false });
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
        setHold({ starting: false });
        return;
      }
      host.courseRunner = new Runner(host, config, session, loadEditor);
    });
  }

  boot();
})();
