"""The sentences rdmadoctor says itself (outside the rules), in each language it speaks: English and Chinese.

The rules carry their own text in both languages ([rule.zh]); these are the verdict's own words, the ladder's
rung titles and the renderers' headings. Slugs, rule ids, commands and values are never translated.
"""
from __future__ import annotations

import os
from typing import Dict, Optional

LANGUAGES = ("en", "zh")

PHRASES: Dict[str, Dict[str, str]] = {
    # verdicts
    "nothing-recognised": {
        "en": "No RDMA tool's output was recognised in the input",
        "zh": "输入中没有识别出任何 RDMA 工具的输出"},
    "paste-both-sides": {
        "en": "Paste the complete output of both sides, each with the command line that started it.",
        "zh": "请贴出两端的完整输出，并各自带上启动它的命令行。"},
    "unexplained-error": {
        "en": ("No run completed: none of the {runs} run(s) printed results, and no rule explains the error they "
               "printed: {text}"),
        "zh": "没有一次运行完成：{runs} 次运行都没有输出结果，也没有任何规则能解释它们输出的错误：{text}"},
    "error-beside-results": {
        "en": ("{done} of {runs} run(s) printed results, but another printed an error that no rule explains: "
               "{text}"),
        "zh": "{runs} 次运行中有 {done} 次输出了结果，但另一次运行输出了任何规则都无法解释的错误：{text}"},
    "error-after-results": {
        "en": "The run printed results, then ended by a signal that no rule explains: {text}",
        "zh": "运行输出了结果，随后被一个任何规则都无法解释的信号结束：{text}"},
    "no-run-completed": {
        "en": "No run completed: none of the {runs} run(s) printed results, and no error says why",
        "zh": "没有一次运行完成：{runs} 次运行都没有输出结果，也没有错误说明原因"},
    "passive-server-only": {
        "en": ("The {tools} server finished normally, and it prints no results: only the client posts the work "
               "requests and measures, so the results are in the client's output"),
        "zh": "{tools} 的服务端正常结束了，而它本来就不输出结果：只有客户端发出请求并测量，结果在客户端的输出里"},
    "paste-the-client": {
        "en": "Paste the client's output of the same run, from its command line to the end.",
        "zh": "请贴出同一次运行中客户端的输出，从它的命令行一直到结束。"},
    "listings-only": {
        "en": ("Only listings of what the host has were recognised ({tools}): nothing in them is a fault "
               "rdmadoctor knows"),
        "zh": "只识别出了列出主机设备情况的输出（{tools}）：其中没有 rdmadoctor 认识的故障"},
    "paste-the-failure": {
        "en": "Paste the output of the program that failed, from its command line to its error, beside these listings.",
        "zh": "请在这些列表旁边贴出失败的那个程序的输出，从它的命令行一直到它的错误。"},
    "no-program-run": {
        "en": ("Only {producers} lines were recognised, with no error rdmadoctor knows in them; such lines never show "
               "that a program's RDMA traffic worked"),
        "zh": ("只识别出了 {producers} 的输出行，其中没有 rdmadoctor 认识的错误；"
               "这类输出无法说明某个程序的 RDMA 通信是否正常")},
    "paste-the-program": {
        "en": "Paste the output of the program that failed, from its command line to its error, beside these lines.",
        "zh": "请在这些输出旁边贴出失败的那个程序的输出，从它的命令行一直到它的错误。"},
    "paste-to-the-end": {
        "en": "Paste the complete output of both sides, from the command line to the end (or to ^C).",
        "zh": "请贴出两端从命令行到结束（或到 ^C）的完整输出。"},
    "ok-runs": {
        "en": "No problem found: {done} of {runs} run(s) printed results",
        "zh": "未发现问题：{runs} 次运行中有 {done} 次输出了结果"},
    "ok": {"en": "No problem found", "zh": "未发现问题"},
    "ok-partly": {
        "en": "No problem found in what could be read (not inspected: {rungs})",
        "zh": "已读取的部分未发现问题（未检查：{rungs}）"},
    "not-inspected": {
        "en": "Not inspected, so not known to be healthy: {what}",
        "zh": "以下部分未能检查，因此不能认为正常：{what}"},
    "cause-not-here": {"en": "; the cause is not in this input", "zh": "；根因不在这份输入里"},
    "next-timeout": {
        "en": "Run the check again with a longer --timeout: the host was too slow to answer in time.",
        "zh": "用更长的 --timeout 再运行一次 check：主机没能及时给出结果。"},
    "next-collect": {
        "en": "Collect the facts on the host itself (`rdmadoctor check --save`): these sections are missing.",
        "zh": "请在主机本机上采集（`rdmadoctor check --save`）：这些部分缺失。"},
    "next-root": {
        "en": "Run the check as root, or as the user of the RDMA jobs with read access to /sys and /dev.",
        "zh": "以 root 运行 check，或以能读取 /sys 和 /dev 的 RDMA 作业用户运行。"},
    "probe-json": {
        "en": "Run the check again with --json and look at sections.probe (what each rung saw).",
        "zh": "加上 --json 再运行一次 check，查看 sections.probe（每一级看到了什么）。"},
    # the host ladder's rungs
    "rung-device": {"en": "RDMA device", "zh": "RDMA 设备"},
    "rung-driver": {"en": "Kernel modules and device access", "zh": "内核模块与设备访问"},
    "rung-port": {"en": "Port state", "zh": "端口状态"},
    "rung-address": {"en": "Addresses and GIDs", "zh": "地址与 GID"},
    "rung-route": {"en": "Route to the peer", "zh": "到对端的路由"},
    "rung-firewall": {"en": "Firewall", "zh": "防火墙"},
    "rung-connection": {"en": "Side-channel port", "zh": "带外连接端口"},
    "rung-limits": {"en": "Locked-memory limit", "zh": "锁定内存限制"},
    "rung-performance": {"en": "Performance (PCIe, MTU)", "zh": "性能（PCIe、MTU）"},
    # the text and HTML renderers' headings
    "status-ok": {"en": "OK", "zh": "正常"},
    "status-warning": {"en": "WARNING", "zh": "警告"},
    "status-failure": {"en": "FAILURE", "zh": "故障"},
    "status-unknown": {"en": "UNKNOWN", "zh": "未知"},
    "confidence": {"en": "{level} confidence", "zh": "置信度：{level}"},
    "confidence-high": {"en": "high", "zh": "高"},
    "confidence-medium": {"en": "medium", "zh": "中"},
    "confidence-low": {"en": "low", "zh": "低"},
    "fix": {"en": "Fix", "zh": "修复"},
    "next": {"en": "Next", "zh": "下一步"},
    "evidence": {"en": "Evidence", "zh": "证据"},
    "why": {"en": "Why", "zh": "原因"},
    "possible-causes": {"en": "Possible causes", "zh": "可能的原因"},
    "findings": {"en": "Findings", "zh": "发现"},
    "ladder": {"en": "Ladder", "zh": "检查阶梯"},
    "note": {"en": "Note", "zh": "说明"},
    "explained-above": {"en": "Explained by the findings above", "zh": "已由上面的发现解释"},
    "references": {"en": "References", "zh": "参考"},
    "more-of-rule": {
        "en": "{n} more finding(s) of {rule}, one per run, not shown",
        "zh": "{rule} 另有 {n} 条发现（每次运行一条），未显示"},
    "runs": {"en": "run(s)", "zh": "次运行"},
    "cause": {"en": "Cause", "zh": "根因"},
    "symptom": {"en": "symptom", "zh": "症状"},
}


def language(requested: Optional[str] = None, environ: Optional[Dict[str, str]] = None) -> str:
    """--lang, else LC_ALL / LC_MESSAGES / LANG (zh_CN.UTF-8 -> zh), else English."""
    if requested:
        lang = requested.lower().split("_")[0].split("-")[0]
        if lang not in LANGUAGES:
            raise ValueError(f"language {requested!r} is not one of {', '.join(LANGUAGES)}")
        return lang
    env = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def say(key: str, lang: Optional[str] = None, **values: object) -> str:
    """The phrase in `lang` (English when it has none), with its {names} filled in."""
    entry = PHRASES[key]
    text = entry.get(lang or "en") or entry["en"]
    return text.format(**values) if values else text
