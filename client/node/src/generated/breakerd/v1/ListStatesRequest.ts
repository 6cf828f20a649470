// Original file: proto/breakerd/v1/breaker.proto


export interface ListStatesRequest {
}

export interface ListStatesRequest__Output {
}
