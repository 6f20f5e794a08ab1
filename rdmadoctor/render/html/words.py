"""The HTML report's own words (headings, labels, section notes) in Chinese. The findings' titles, explanations
and fixes arrive in the document's language already (the rules' [rule.zh], knowledge/phrases.py); what the
report adds around them is written in English in the templates and passed through `tr`, which gives the
Chinese where the document is Chinese. Slugs, rule ids, commands, fact names and values are never translated."""
from __future__ import annotations

from typing import Callable, Dict

ZH: Dict[str, str] = {
    # the verdict
    "No problem found": "未发现问题", "Warning": "警告", "Failure": "故障", "Cause unknown": "根因未知",
    "Info": "提示", "Fix": "修复", "Possible causes": "可能的原因", "Next steps": "下一步",
    "cause": "根因", "rule": "规则", "confidence": "置信度", "findings": "发现", "kind": "类型", "step": "步骤",
    "report": "报告", "redacted": "已脱敏", "symptom": "症状", "Explained by": "已由此解释：",
    "Copy": "复制", "Copy command": "复制命令", "evidence": "证据", "raw log": "原始日志", "line": "行",
    # sections
    "Sections": "目录", "Checks": "检查", "Findings": "发现", "Server vs client": "服务端与客户端对比",
    "Runs": "运行", "Sweep": "扫描", "Results": "结果", "Facts": "主机信息", "Raw logs": "原始日志",
    "Raw facts": "原始信息", "Expand all": "全部展开", "Notes": "说明", "Evidence": "证据",
    "References": "参考", "No finding.": "没有发现。", "None.": "无。",
    "Read off the findings: a log shows only the steps perftest reached, so a step without a finding was not "
    "inspected.": "由发现推出：日志只显示 perftest 走到的步骤，没有发现的步骤即未检查。",
    "skipped because": "已跳过，因为", "did not pass": "未通过",
    "No link rate known (give": "未知链路速率（请给出", "): the bars are not scaled to the link.":
    "）：柱状图未按链路速率缩放。",
    # the log ladder's steps (the host ladder's titles arrive translated)
    "Input": "输入", "Device": "设备", "Driver": "驱动", "Port": "端口", "Address": "地址", "Route": "路由",
    "Firewall": "防火墙", "Limits": "资源限制", "Connection": "连接", "Exchange": "信息交换", "Resources": "资源",
    "Transport": "传输", "Performance": "性能",
    # the ladder's states
    "passed": "通过", "failed": "失败", "warning": "警告", "skipped": "跳过", "not inspected": "未检查",
    "no finding": "无发现",
    # tables
    "parameter": "参数", "server": "服务端", "client": "客户端", "differs": "不同", "combination": "组合",
    "status": "状态", "BW avg (Gb/s)": "平均带宽 (Gb/s)", "msg rate (Mpps)": "消息速率 (Mpps)",
    "latency (usec)": "时延 (usec)", "best": "最佳", "address": "地址", "size": "大小", "iterations": "迭代次数",
    "values": "数值", "unit": "单位", "side": "端", "no results": "无结果", "facts (JSON)": "主机信息 (JSON)",
    "The raw text is not in this result (it was saved by an rdmadoctor that did not keep it): the quoted lines "
    "are under each finding.": "此结果中没有原始文本（保存它的 rdmadoctor 未保留原文）：引用的行在各条发现下。",
    "a self-contained report: it loads nothing from the network.": "自包含的报告：不从网络加载任何内容。",
}


def translator(lang: str) -> Callable[[str], str]:
    """`tr` for the templates: the text itself in English, its Chinese (when known) in Chinese."""
    if lang == "zh":
        return lambda text: ZH.get(text, text)
    return lambda text: text
