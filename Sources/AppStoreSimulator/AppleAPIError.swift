/// An App Store Server API error answer: `{"errorCode", "errorMessage"}` with its status.
struct AppleAPIError: Error, Sendable {
    var status: Int
    var errorCode: Int?
    var message: String

    init(_ status: Int, _ errorCode: Int?, _ message: String) {
        self.status = status
        self.errorCode = errorCode
        self.message = message
    }

    var answer: SimulatorState.APIAnswer {
        var body: [String: Any] = ["errorMessage": message]
        body["errorCode"] = errorCode
        return (status, body)
    }
}
