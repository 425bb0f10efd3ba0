"""自查：运行你的笔记本里自己写的代码，再运行本课的自查（与网页上“检查”按钮相同），逐项说明结果。

用法：python check.py [你的笔记本.ipynb]：在网页里做的，给出网页“下载 notebook”存下的文件；在 JupyterLab 里
做的，不写参数就检查 work/ 里你的那份。只需要 Python 3.9 以上，不需要安装任何包。
评分时还会运行同类的隐藏检查（输入不同）；问答题由老师评分。全部通过时退出码为 0，否则为 1。
"""

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG = json.loads((HERE / "bundle.json").read_text(encoding="utf-8"))
BLANK = "______"

# The browser's Check (the helpers of the site's runner-worker.js, copied here by `coursekit bundle`).
HELPERS = CONFIG["helpers"]


def student_cells(notebook):
    """(number among the notebook's code cells, from 1; source) of each code cell the student writes:
    every non-empty code cell except the locked grading cells."""
    cells, number = [], 0
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        number += 1
        info = cell.get("metadata", {}).get("nbgrader", {})
        source = cell.get("source", "")
        source = source if isinstance(source, str) else "".join(source)
        if source.strip() and not (info.get("grade") and not info.get("solution")):
            cells.append((number, source))
    return cells


def in_cells(text, cells):
    """`text` with each "你的代码第 N 行" (a line of the cells joined as the check runs them) said as the
    code cell and line the student sees in the notebook."""
    where = []
    for number, source in cells:
        where += [(number, line) for line in range(1, source.count("\n") + 2)] + [(number, None)]

    def say(match):
        n = int(match[1])
        if not 1 <= n <= len(where) or where[n - 1][1] is None:
            return match[0]
        number, line = where[n - 1]
        return f"第 {number} 个代码格第 {line} 行"

    return re.sub(r"你的代码第 (\d+) 行", say, text)


def main(argv):
    path = Path(argv[0]) if argv else HERE / "work" / CONFIG["notebook"]
    if not argv and not path.is_file():
        print(f"error: 没有 work/{CONFIG['notebook']}（它由 python lab.py 第一次运行时建立）；在网页里做的，请给出"
              "“下载 notebook”存下的文件：python check.py 下载的文件.ipynb", file=sys.stderr)
        return 2
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        print(f"error: {path}: 没有这个文件；请给出你的 .ipynb 的路径", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        print(f"error: {path}: 不是能读取的笔记本（{exc}）；请在 Jupyter 里保存后再试", file=sys.stderr)
        return 2
    cells = student_cells(notebook)
    code = "\n\n".join(source for _, source in cells)
    namespace = {"__name__": "course_check"}
    exec(compile(HELPERS, "<helpers>", "exec"), namespace)
    result = json.loads(in_cells(namespace["_course_check"](code, CONFIG["checks"], CONFIG["time_limit_s"],
                                                            CONFIG["given"]), cells))
    print(f"检查 {path}（运行自查；评分时还会运行同类的隐藏检查，输入不同；问答题由老师评分）")
    ok = True
    if code.count(BLANK):
        ok = False
        print(f"  ✗ 还有 {code.count(BLANK)} 处 {BLANK} 没有填写")
    if result["setup_error"]:
        ok = False
        print("  ✗ 你的代码本身运行出错（各项检查仍照常进行）：")
        print("      " + result["setup_error"].replace("\n", "\n      "))
    if result["given_error"]:
        ok = False
        print(f"  ✗ {CONFIG['given']['title']}：{result['given_error']}")
    for item in result["results"]:
        mark = "✓" if item["passed"] else "✗"
        print(f"  {mark} {item['title']}：{'通过' if item['passed'] else '未通过'}")
        if not item["passed"]:
            ok = False
            print("      " + item["message"].replace("\n", "\n      "))
    passed = sum(item["passed"] for item in result["results"])
    advice = "。" if ok else "；请修改后再运行 python check.py。"
    print(f"结果：{passed}/{len(result['results'])} 项检查通过{advice}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
