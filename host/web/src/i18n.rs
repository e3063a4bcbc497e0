//! The languages of the pages, English and Chinese in Simplified (zh-CN)
//! and Traditional (zh-TW) characters: which one a request gets, every
//! label, and counts with their plural forms.
//!
//! The language is, in order: a `lang` query parameter (the page's switch
//! links set it, and the answer remembers it in a cookie), the `cordis_lang`
//! cookie, the browser's `Accept-Language` (its supported tag of highest
//! quality), English.
//!
//! Traditional readers never get Simplified by default: `zh-TW`, `zh-HK`,
//! `zh-MO` and any `zh-Hant` tag name zh-TW, and a bare `zh` names zh-TW
//! too when the same `Accept-Language` holds a Traditional tag.

/// A language of the pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    /// English (`en`).
    En,
    /// Chinese in Simplified characters (`zh-CN`).
    ZhCn,
    /// Chinese in Traditional characters (`zh-TW`).
    ZhTw,
}

/// The name of the cookie that remembers the language switch.
pub const COOKIE: &str = "cordis_lang";

impl Lang {
    /// Every language, in the order the switch lists them.
    pub const ALL: [Lang; 3] = [Lang::En, Lang::ZhCn, Lang::ZhTw];

    /// The BCP 47 tag: `en`, `zh-CN`, `zh-TW`.
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::ZhCn => "zh-CN",
            Lang::ZhTw => "zh-TW",
        }
    }

    /// The language a tag names, any case, `-` or `_`: `en`, `en-GB`;
    /// `zh-TW`, `zh-HK`, `zh-MO`, `zh-Hant`, `zh-Hant-*` (Traditional);
    /// `zh`, `zh-CN`, `zh-SG`, `zh-Hans` and other `zh-*` (Simplified).
    /// `None` for any other.
    pub fn from_tag(tag: &str) -> Option<Lang> {
        let tag = tag.trim().to_ascii_lowercase().replace('_', "-");
        let mut parts = tag.split('-');
        match parts.next().unwrap_or_default() {
            "en" => Some(Lang::En),
            "zh" => {
                let traditional = parts.any(|p| matches!(p, "tw" | "hk" | "mo" | "hant"));
                Some(if traditional { Lang::ZhTw } else { Lang::ZhCn })
            }
            _ => None,
        }
    }

    /// The language an `Accept-Language` header prefers among ours: the
    /// supported tag with the highest quality (the first one on a tie);
    /// `None` when it names none. A bare `zh` counts as Traditional when
    /// the header holds a Traditional tag.
    pub fn from_accept_language(header: &str) -> Option<Lang> {
        let tag_of = |part: &str| part.split(';').next().unwrap_or_default().trim().to_string();
        let traditional = header.split(',').any(|part| Lang::from_tag(&tag_of(part)) == Some(Lang::ZhTw));
        let mut best: Option<(Lang, u32)> = None;
        for part in header.split(',') {
            let mut fields = part.split(';');
            let Some(mut lang) = fields.next().and_then(Lang::from_tag) else { continue };
            if lang == Lang::ZhCn && traditional && tag_of(part).eq_ignore_ascii_case("zh") {
                lang = Lang::ZhTw;
            }
            let q = fields
                .filter_map(|f| f.trim().strip_prefix("q="))
                .filter_map(|q| q.trim().parse::<f32>().ok())
                .next()
                .map_or(1000, |q| (q.clamp(0.0, 1.0) * 1000.0) as u32);
            if q > 0 && best.is_none_or(|(_, b)| q > b) {
                best = Some((lang, q));
            }
        }
        best.map(|(lang, _)| lang)
    }

    /// The name of the language in itself, for the switch.
    pub fn own_name(self) -> &'static str {
        match self {
            Lang::En => "English",
            Lang::ZhCn => "简体中文",
            Lang::ZhTw => "繁體中文",
        }
    }

    /// A fixed label.
    pub fn t(self, key: Text) -> &'static str {
        use Text::*;
        match (self, key) {
            (Lang::En, Sessions) => "Sessions",
            (Lang::ZhCn, Sessions) => "会话",
            (Lang::ZhTw, Sessions) => "工作階段",
            (Lang::En, Session) => "Session",
            (Lang::ZhCn, Session) => "会话",
            (Lang::ZhTw, Session) => "工作階段",
            (Lang::En, Title) => "Title",
            (Lang::ZhCn, Title) => "标题",
            (Lang::ZhTw, Title) => "標題",
            (Lang::En, Updated) => "Updated",
            (Lang::ZhCn, Updated) => "更新时间",
            (Lang::ZhTw, Updated) => "更新時間",
            (Lang::En, Status) => "Status",
            (Lang::ZhCn, Status) => "状态",
            (Lang::ZhTw, Status) => "狀態",
            (Lang::En, Plan) => "Plan",
            (Lang::ZhCn, Plan) => "计划",
            (Lang::ZhTw, Plan) => "計畫",
            (Lang::En, NoSessions) => "No sessions in this store yet.",
            (Lang::ZhCn, NoSessions) => "此存储中还没有会话。",
            (Lang::ZhTw, NoSessions) => "此儲存區中還沒有工作階段。",
            (Lang::En, Untitled) => "(no prompt yet)",
            (Lang::ZhCn, Untitled) => "（尚无提示）",
            (Lang::ZhTw, Untitled) => "（尚無提示）",
            (Lang::En, NoPlan) => "no plan",
            (Lang::ZhCn, NoPlan) => "无计划",
            (Lang::ZhTw, NoPlan) => "無計畫",
            (Lang::En, NoTodos) => "no todos",
            (Lang::ZhCn, NoTodos) => "无待办",
            (Lang::ZhTw, NoTodos) => "無待辦事項",
            (Lang::En, You) => "You",
            (Lang::ZhCn, You) => "用户",
            (Lang::ZhTw, You) => "使用者",
            (Lang::En, Assistant) => "Assistant",
            (Lang::ZhCn, Assistant) => "助手",
            (Lang::ZhTw, Assistant) => "助理",
            (Lang::En, Reminder) => "Reminder",
            (Lang::ZhCn, Reminder) => "提醒",
            (Lang::ZhTw, Reminder) => "提醒",
            (Lang::En, Reasoning) => "Reasoning",
            (Lang::ZhCn, Reasoning) => "推理过程",
            (Lang::ZhTw, Reasoning) => "推理過程",
            (Lang::En, Arguments) => "Arguments",
            (Lang::ZhCn, Arguments) => "参数",
            (Lang::ZhTw, Arguments) => "參數",
            (Lang::En, Result) => "Result",
            (Lang::ZhCn, Result) => "结果",
            (Lang::ZhTw, Result) => "結果",
            (Lang::En, NoResultYet) => "no result yet",
            (Lang::ZhCn, NoResultYet) => "尚无结果",
            (Lang::ZhTw, NoResultYet) => "尚無結果",
            (Lang::En, Earlier) => "Earlier events",
            (Lang::ZhCn, Earlier) => "更早的事件",
            (Lang::ZhTw, Earlier) => "較早的事件",
            (Lang::En, Later) => "Later events",
            (Lang::ZhCn, Later) => "更晚的事件",
            (Lang::ZhTw, Later) => "較晚的事件",
            (Lang::En, Latest) => "Latest events (live)",
            (Lang::ZhCn, Latest) => "最新事件（实时）",
            (Lang::ZhTw, Latest) => "最新事件（即時）",
            (Lang::En, AllSessions) => "All sessions",
            (Lang::ZhCn, AllSessions) => "全部会话",
            (Lang::ZhTw, AllSessions) => "所有工作階段",
            (Lang::En, Language) => "Language",
            (Lang::ZhCn, Language) => "语言",
            (Lang::ZhTw, Language) => "語言",
            (Lang::En, Streaming) => "writing…",
            (Lang::ZhCn, Streaming) => "正在输出…",
            (Lang::ZhTw, Streaming) => "正在輸出…",
            (Lang::En, ShowAll) => "the whole text",
            (Lang::ZhCn, ShowAll) => "查看全文",
            (Lang::ZhTw, ShowAll) => "檢視全文",
            (Lang::En, Completed) => "completed",
            (Lang::ZhCn, Completed) => "已完成",
            (Lang::ZhTw, Completed) => "已完成",
            (Lang::En, InProgress) => "in progress",
            (Lang::ZhCn, InProgress) => "进行中",
            (Lang::ZhTw, InProgress) => "進行中",
            (Lang::En, Pending) => "pending",
            (Lang::ZhCn, Pending) => "待处理",
            (Lang::ZhTw, Pending) => "待處理",
            (Lang::En, Succeeded) => "succeeded",
            (Lang::ZhCn, Succeeded) => "成功",
            (Lang::ZhTw, Succeeded) => "成功",
            (Lang::En, Failed) => "failed",
            (Lang::ZhCn, Failed) => "失败",
            (Lang::ZhTw, Failed) => "失敗",
            (Lang::En, Running) => "running",
            (Lang::ZhCn, Running) => "运行中",
            (Lang::ZhTw, Running) => "執行中",
            (Lang::En, Interrupted) => "interrupted",
            (Lang::ZhCn, Interrupted) => "已中断",
            (Lang::ZhTw, Interrupted) => "已中斷",
            (Lang::En, Empty) => "empty",
            (Lang::ZhCn, Empty) => "空",
            (Lang::ZhTw, Empty) => "空",
            (Lang::En, Live) => "Live: updates as events are appended",
            (Lang::ZhCn, Live) => "实时：追加事件时自动更新",
            (Lang::ZhTw, Live) => "即時：新增事件時自動更新",
            (Lang::En, Stale) => "Stale: no word from the server; reconnecting…",
            (Lang::ZhCn, Stale) => "已过时：服务器无响应，正在重连…",
            (Lang::ZhTw, Stale) => "已過時：伺服器沒有回應，正在重新連線…",
            (Lang::En, Offline) => "Not live: reconnecting…",
            (Lang::ZhCn, Offline) => "未连接：正在重连…",
            (Lang::ZhTw, Offline) => "未連線：正在重新連線…",
            (Lang::En, NotFound) => "Not found",
            (Lang::ZhCn, NotFound) => "未找到",
            (Lang::ZhTw, NotFound) => "找不到",
        }
    }

    /// A tool's title (its `present_call`'s `title`) in this language: the
    /// titles of the tools cordis ships are translated, any other is shown
    /// as the tool gives it.
    pub fn tool_title(self, title: &str) -> String {
        let translated = match (self, title) {
            (Lang::ZhCn, "Update todo list") => "更新待办列表",
            (Lang::ZhTw, "Update todo list") => "更新待辦清單",
            _ => title,
        };
        translated.to_string()
    }

    /// `n` with its digits grouped by thousands: `1,048,576` (both
    /// scripts of Chinese group the same way).
    pub fn number(self, n: usize) -> String {
        let digits = n.to_string();
        let mut out = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    }

    /// How many lines of a log could not be read or break its rules:
    /// `1 line of this log could not be read or breaks its rules`.
    pub fn problems(self, n: usize) -> String {
        match self {
            Lang::En if n == 1 => "1 line of this log could not be read or breaks its rules".to_string(),
            Lang::En => format!("{} lines of this log could not be read or break its rules", self.number(n)),
            Lang::ZhCn => format!("{} 行日志无法读取或违反其规则", self.number(n)),
            Lang::ZhTw => format!("{} 行日誌無法讀取或違反其規則", self.number(n)),
        }
    }

    /// `n` of something with its plural form: English `1 event`, `2 events`;
    /// Chinese has one form, with its measure word (`2 个事件`).
    pub fn count(self, n: usize, noun: Noun) -> String {
        match self {
            Lang::En => {
                let (one, other) = match noun {
                    Noun::Event => ("event", "events"),
                    Noun::Session => ("session", "sessions"),
                    Noun::Line => ("line", "lines"),
                    Noun::Character => ("character", "characters"),
                };
                format!("{} {}", self.number(n), if n == 1 { one } else { other })
            }
            Lang::ZhCn => {
                let word = match noun {
                    Noun::Event => "个事件",
                    Noun::Session => "个会话",
                    Noun::Line => "行",
                    Noun::Character => "个字符",
                };
                format!("{} {word}", self.number(n))
            }
            Lang::ZhTw => {
                let word = match noun {
                    Noun::Event => "個事件",
                    Noun::Session => "個工作階段",
                    Noun::Line => "行",
                    Noun::Character => "個字元",
                };
                format!("{} {word}", self.number(n))
            }
        }
    }

    /// The accessible name of a row's `+N` suffix: `and 1 more in
    /// progress`, `and 2 more in progress`; `另有 2 项进行中`.
    pub fn more_in_progress(self, n: usize) -> String {
        match self {
            Lang::En => format!("and {n} more in progress"),
            Lang::ZhCn => format!("另有 {n} 项进行中"),
            Lang::ZhTw => format!("另有 {n} 項進行中"),
        }
    }

    /// A row's done/total clause: `1/4 completed`, `1/4 已完成`.
    pub fn done_of(self, done: usize, total: usize) -> String {
        format!("{done}/{total} {}", self.t(Text::Completed))
    }

    /// `Turn 3`, `第 3 轮`.
    pub fn turn(self, n: u64) -> String {
        match self {
            Lang::En => format!("Turn {n}"),
            Lang::ZhCn => format!("第 {n} 轮"),
            Lang::ZhTw => format!("第 {n} 輪"),
        }
    }

    /// Events `from`–`to` of `total` (1-based, inclusive), for a page.
    pub fn window(self, from: usize, to: usize, total: usize) -> String {
        match self {
            Lang::En => format!("events {}–{} of {}", self.number(from), self.number(to), self.count(total, Noun::Event)),
            Lang::ZhCn => format!("第 {}–{} 个事件，共 {} 个", self.number(from), self.number(to), self.number(total)),
            Lang::ZhTw => format!("第 {}–{} 個事件，共 {} 個", self.number(from), self.number(to), self.number(total)),
        }
    }

    /// `shown: the first 100 000 of 1 048 576 characters`.
    pub fn cut_note(self, shown: usize, total: usize) -> String {
        match self {
            Lang::En => format!("showing the first {} of {}", self.number(shown), self.count(total, Noun::Character)),
            Lang::ZhCn => format!("仅显示前 {} 个字符，共 {} 个", self.number(shown), self.number(total)),
            Lang::ZhTw => format!("僅顯示前 {} 個字元，共 {} 個", self.number(shown), self.number(total)),
        }
    }
}

/// A fixed label (see [`Lang::t`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Text {
    Sessions,
    Session,
    Title,
    Updated,
    Status,
    Plan,
    NoSessions,
    Untitled,
    NoPlan,
    NoTodos,
    You,
    Assistant,
    Reminder,
    Reasoning,
    Arguments,
    Result,
    NoResultYet,
    Earlier,
    Later,
    Latest,
    AllSessions,
    Language,
    Streaming,
    ShowAll,
    Completed,
    InProgress,
    Pending,
    Succeeded,
    Failed,
    Running,
    Interrupted,
    Empty,
    Live,
    Stale,
    Offline,
    NotFound,
}

/// A counted noun (see [`Lang::count`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Noun {
    /// A session event.
    Event,
    /// A session.
    Session,
    /// A line of a log.
    Line,
    /// A character of text.
    Character,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_language_picks_by_quality() {
        assert_eq!(Lang::from_accept_language("zh-CN,zh;q=0.9,en;q=0.8"), Some(Lang::ZhCn));
        assert_eq!(Lang::from_accept_language("fr-FR, en-GB;q=0.5, zh;q=0.4"), Some(Lang::En));
        assert_eq!(Lang::from_accept_language("de;q=1, zh-Hans;q=0.7, en;q=0.9"), Some(Lang::En));
        assert_eq!(Lang::from_accept_language("en;q=0, zh"), Some(Lang::ZhCn));
        assert_eq!(Lang::from_accept_language("fr, de"), None);
        assert_eq!(Lang::from_accept_language(""), None);
    }

    #[test]
    fn traditional_readers_never_get_simplified() {
        for tag in ["zh-TW", "zh-HK", "zh-MO", "zh-Hant", "zh-Hant-TW", "ZH_tw", "zh-hant-hk"] {
            assert_eq!(Lang::from_tag(tag), Some(Lang::ZhTw), "{tag}");
            assert_eq!(Lang::from_accept_language(tag), Some(Lang::ZhTw), "{tag}");
        }
        for tag in ["zh", "zh-CN", "zh-SG", "zh-Hans", "zh-Hans-CN"] {
            assert_eq!(Lang::from_tag(tag), Some(Lang::ZhCn), "{tag}");
        }
        // Chrome's header for a Taiwanese reader, and a bare zh before it.
        assert_eq!(Lang::from_accept_language("zh-TW,zh;q=0.9,en-US;q=0.8,en;q=0.7"), Some(Lang::ZhTw));
        assert_eq!(Lang::from_accept_language("zh,zh-HK;q=0.9"), Some(Lang::ZhTw));
        // Simplified asked for by name stays Simplified.
        assert_eq!(Lang::from_accept_language("zh-CN,zh-TW;q=0.5"), Some(Lang::ZhCn));
    }

    #[test]
    fn plurals() {
        assert_eq!(Lang::En.count(1, Noun::Event), "1 event");
        assert_eq!(Lang::En.count(0, Noun::Event), "0 events");
        assert_eq!(Lang::En.count(2, Noun::Session), "2 sessions");
        assert_eq!(Lang::ZhCn.count(1, Noun::Event), "1 个事件");
        assert_eq!(Lang::ZhCn.count(2, Noun::Event), "2 个事件");
        assert_eq!(Lang::En.more_in_progress(2), "and 2 more in progress");
        assert_eq!(Lang::ZhCn.more_in_progress(2), "另有 2 项进行中");
        assert_eq!(Lang::En.count(1_048_576, Noun::Character), "1,048,576 characters");
        assert_eq!(Lang::En.number(999), "999");
        assert_eq!(Lang::En.number(1000), "1,000");
        assert_eq!(Lang::ZhTw.count(20_000, Noun::Event), "20,000 個事件");
        assert_eq!(Lang::En.problems(1), "1 line of this log could not be read or breaks its rules");
        assert_eq!(Lang::En.problems(2), "2 lines of this log could not be read or break its rules");
    }
}
